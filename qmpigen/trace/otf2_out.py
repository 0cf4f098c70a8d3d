"""The OTF2 archive, written with the otf2 package (the OTF2 library's own bindings):
a system tree node per host, a process per rank, a location per rank and thread, a
region per function, MPI point-to-point and collective events where OTF2 has them."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import otf2
from otf2.enums import CollectiveOp, GroupType, LocationGroupType, LocationType, Paradigm, RegionRole

COLLECTIVE_OPS = {
    "MPI_Barrier": CollectiveOp.BARRIER,
    "MPI_Bcast": CollectiveOp.BCAST,
    "MPI_Reduce": CollectiveOp.REDUCE,
    "MPI_Allreduce": CollectiveOp.ALLREDUCE,
    "MPI_Comm_split": CollectiveOp.CREATE_HANDLE,
    "MPI_Comm_dup": CollectiveOp.CREATE_HANDLE,
    "MPI_Comm_free": CollectiveOp.DESTROY_HANDLE,
    "MPI_File_open": CollectiveOp.CREATE_HANDLE,
    "MPI_File_close": CollectiveOp.DESTROY_HANDLE,
}
ROLES = {"MPI_Send": RegionRole.POINT2POINT, "MPI_Recv": RegionRole.POINT2POINT, "MPI_Barrier": RegionRole.BARRIER}


class Otf2Writer:
    def __init__(self, path: Path, world_size: int, hosts: Dict[int, str], threads: Dict[int, list]):
        self.writer = otf2.writer.Writer(str(path), timer_resolution=1_000_000_000)
        defs = self.writer.definitions
        machine = defs.system_tree_node("machine")
        nodes = {host: defs.system_tree_node(host, parent=machine) for host in sorted(set(hosts.values()))}
        self.locations: Dict[Tuple[int, int], object] = {}
        for rank in range(world_size):
            group = defs.location_group(f"rank {rank}", location_group_type=LocationGroupType.PROCESS,
                                        system_tree_parent=nodes.get(hosts.get(rank, "unknown")) or machine)
            for thread in sorted(threads.get(rank, [0])):
                self.locations[(rank, thread)] = defs.location(f"rank {rank} thread {thread}",
                                                               type=LocationType.CPU_THREAD, group=group)
        self.rank_locations = [self.locations.get((rank, 0)) or self.locations[(rank, min(threads[rank]))]
                               for rank in range(world_size)]
        defs.group("MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                   members=self.rank_locations)
        self.regions: Dict[str, object] = {}
        self.comms: Dict[int, object] = {}
        self.defs = defs

    def comm(self, comm_id: int, members: Tuple[int, ...], name: str):
        if comm_id not in self.comms:
            group = self.defs.group(f"{name} group", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                    members=[self.rank_locations[r] for r in members])
            self.comms[comm_id] = self.defs.comm(name, group=group)
        return self.comms[comm_id]

    def region(self, func: str):
        if func not in self.regions:
            self.regions[func] = self.defs.region(func, paradigm=Paradigm.MPI,
                                                  region_role=ROLES.get(func, RegionRole.FUNCTION))
        return self.regions[func]

    def events(self, rank: int, thread: int):
        return self.writer.event_writer_from_location(self.locations[(rank, thread)])

    def close(self) -> None:
        self.writer.close()
