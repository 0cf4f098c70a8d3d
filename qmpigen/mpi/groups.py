"""Named groups of MPI functions for tool specs, and the MPI function names we know of.

Both are data. A group is defined once here, by name patterns (fnmatch globs, matched
case-sensitively against the enumeration of the MPI at hand) and, where the model
already knows it, by category (qmpigen.mpi.quirks.NAME_CATEGORIES). Patterns, not lists:
the same spec works on an MPI 3.1 header (Open MPI 5) and an MPI 5.0 one (MPICH 5),
picking up the large-count `_c`, persistent `_init` and nonblocking `I` variants each
one declares. docs/spec-language.md lists them (a test keeps that list complete).
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, Optional, Sequence, Tuple

from qmpigen.mpi.model import LIFECYCLE, Enumeration, MpiApi, MpiFunction
from qmpigen.mpi.quirks import CONVERSION_SUFFIXES
from qmpigen.mpi.roles import KINDS, roles_of

# Conversions between C handles and Fortran or integer handles: bookkeeping, not
# communication; left out of the communication groups.
_CONVERSIONS = tuple("*" + suffix for suffix in CONVERSION_SUFFIXES)


# The functions that start, wait for, test, cancel and free requests.
_COMPLETION = (
    "MPI_Start",
    "MPI_Startall",
    "MPI_Wait",
    "MPI_Wait[as]*",
    "MPI_Test",
    "MPI_Test[as]*",
    "MPI_Test_cancelled",
    "MPI_Cancel",
    "MPI_Request_free",
    "MPI_Request_get_status*",
)


@dataclass(frozen=True)
class Group:
    name: str
    description: str
    include: Tuple[str, ...]  # globs on the function name
    exclude: Tuple[str, ...] = ()  # globs taken away again
    categories: Tuple[str, ...] = ()  # model categories that also belong
    kinds: Tuple[str, ...] = ()  # function kinds (qmpigen.mpi.roles) that also belong
    roles: Tuple[str, ...] = ()  # parameter roles (qmpigen.mpi.roles): a function with one belongs

    def matches(self, function: MpiFunction) -> bool:
        name = function.name
        if any(fnmatch.fnmatchcase(name, glob) for glob in self.exclude):
            return False
        if any(fnmatch.fnmatchcase(name, glob) for glob in self.include) or any(
            function.has_category(c) for c in self.categories
        ):
            return True
        if not self.kinds and not self.roles:
            return False
        roles = roles_of(function)
        return roles.kind in self.kinds or any(role in self.roles for role in roles.present)


GROUPS: Tuple[Group, ...] = (
    Group("all", "every function of the enumeration", ("*",)),
    Group(
        "operations",
        "every function with a kind but 'other' (qmpigen functions --roles): it communicates, does I/O, or "
        "creates, frees, starts or completes an MPI object",
        (),
        kinds=tuple(k for k in KINDS if k != "other"),
    ),
    Group(
        "point-to-point",
        "blocking, nonblocking, persistent and partitioned sends and receives, probes (MPI 5.0 ch. 3-4)",
        (
            "MPI_*[Ss]end",
            "MPI_*[Ss]end_c",
            "MPI_*[Ss]end_init",
            "MPI_*[Ss]end_init_c",
            "MPI_*[Rr]ecv",
            "MPI_*[Rr]ecv_c",
            "MPI_*[Rr]ecv_init",
            "MPI_*[Rr]ecv_init_c",
            "MPI_*[Ss]endrecv*",
            "MPI_*[Pp]robe",
            "MPI_Pready*",
            "MPI_Parrived",
        ),
    ),
    Group(
        "partitioned",
        "partitioned communication (MPI 4.0)",
        ("MPI_Psend_init", "MPI_Precv_init", "MPI_Pready*", "MPI_Parrived"),
    ),
    Group("completion", "starting, waiting for, testing, cancelling and freeing requests", _COMPLETION),
    Group(
        "requests",
        "every function that hands out a request: nonblocking and persistent calls, partitioned and generalized "
        "requests, request-based RMA, nonblocking I/O (the completion group takes them back)",
        (),
        exclude=_COMPLETION,  # their request parameter has the role too: the one they take back
        roles=("request",),
    ),
    Group(
        "collectives",
        "blocking, nonblocking and persistent collectives, neighborhood collectives included",
        (
            "MPI_Barrier*",
            "MPI_Ibarrier",
            "MPI_*[Bb]cast*",
            "MPI_*[Gg]ather*",
            "MPI_*[Ss]catter*",
            "MPI_*[Aa]lltoall*",
            "MPI_*[Rr]educe*",
            "MPI_*[Ss]can*",
        ),
        exclude=("MPI_Reduce_local*",),
    ),
    Group("neighborhood", "neighborhood collectives on process topologies", ("MPI_*[Nn]eighbor_*",)),
    Group(
        "one-sided",
        "remote memory access: windows, put/get/accumulate, synchronisation",
        (
            "MPI_Win_*",
            "MPI_Put",
            "MPI_Put_c",
            "MPI_Rput*",
            "MPI_Get",
            "MPI_Get_c",
            "MPI_Rget",
            "MPI_Rget_c",
            "MPI_*[Aa]ccumulate*",
            "MPI_Fetch_and_op",
            "MPI_Compare_and_swap",
        ),
        exclude=_CONVERSIONS,
    ),
    Group(
        "io", "MPI-IO: files, views, reads and writes", ("MPI_File_*", "MPI_Register_datarep*"), exclude=_CONVERSIONS
    ),
    Group(
        "init-finalize",
        "starting and ending MPI in the world and sessions models, and asking about it",
        tuple(LIFECYCLE) + ("MPI_Initialized", "MPI_Finalized", "MPI_Is_thread_main", "MPI_Query_thread", "MPI_Abort"),
    ),
    Group("sessions", "the MPI 4.0 sessions model", ("MPI_Session_*",), exclude=_CONVERSIONS),
    Group(
        "communicators",
        "communicator and intercommunicator management",
        ("MPI_Comm_*", "MPI_Intercomm_*"),
        exclude=_CONVERSIONS,
    ),
    Group("process-groups", "process groups (MPI_Group_*)", ("MPI_Group_*",), exclude=_CONVERSIONS),
    Group(
        "datatypes",
        "derived datatypes, packing, addresses and element counts",
        (
            "MPI_Type_*",
            "MPI_Pack*",
            "MPI_Unpack*",
            "MPI_Get_address",
            "MPI_Get_elements*",
            "MPI_Get_count*",
            "MPI_Aint_*",
            "MPI_Address",
        ),
        exclude=_CONVERSIONS,
    ),
    Group(
        "topology",
        "Cartesian, graph and distributed graph topologies",
        ("MPI_Cart*", "MPI_Graph*", "MPI_Dist_graph*", "MPI_Dims_create", "MPI_Topo_test"),
    ),
    Group("info", "info objects", ("MPI_Info_*",), exclude=_CONVERSIONS),
    Group(
        "errors",
        "error handlers, classes, codes and strings",
        ("MPI_Errhandler_*", "MPI_Error_*", "MPI_Add_error_*", "MPI_Remove_error_*", "MPI_*_errhandler"),
        exclude=_CONVERSIONS,
    ),
    Group("timing", "MPI_Wtime and MPI_Wtick", ("MPI_Wtime", "MPI_Wtick")),
    Group("tools-interface", "the MPI_T tool information interface", (), categories=("mpi_t",)),
    Group("large-count", "MPI 4.0 large-count (_c) variants", (), categories=("large_count",)),
    Group("conversions", "handle conversions (Fortran, integer)", (), categories=("conversion",)),
    Group(
        "deprecated",
        "deprecated and removed functions that the header still declares",
        (),
        categories=("deprecated", "removed"),
    ),
)

BY_NAME: Dict[str, Group] = {g.name: g for g in GROUPS}


# Every MPI_ function declared by the mpi.h of MPICH 5.0.2 (MPI 5.0) or Open MPI 5.0.11
# (MPI 3.1 with parts of 4.0): lets an error say "this MPI lacks MPI_Send_c" instead
# of "unknown function" when a spec written for one MPI meets the other.
KNOWN_FUNCTIONS: FrozenSet[str] = frozenset(
    """
MPI_Abi_get_fortran_booleans MPI_Abi_get_fortran_info MPI_Abi_get_info MPI_Abi_get_version
MPI_Abi_set_fortran_booleans MPI_Abi_set_fortran_info MPI_Abort MPI_Accumulate MPI_Accumulate_c
MPI_Add_error_class MPI_Add_error_code MPI_Add_error_string MPI_Address MPI_Aint_add MPI_Aint_diff MPI_Allgather
MPI_Allgather_c MPI_Allgather_init MPI_Allgather_init_c MPI_Allgatherv MPI_Allgatherv_c MPI_Allgatherv_init
MPI_Allgatherv_init_c MPI_Alloc_mem MPI_Allreduce MPI_Allreduce_c MPI_Allreduce_init MPI_Allreduce_init_c
MPI_Alltoall MPI_Alltoall_c MPI_Alltoall_init MPI_Alltoall_init_c MPI_Alltoallv MPI_Alltoallv_c
MPI_Alltoallv_init MPI_Alltoallv_init_c MPI_Alltoallw MPI_Alltoallw_c MPI_Alltoallw_init MPI_Alltoallw_init_c
MPI_Attr_delete MPI_Attr_get MPI_Attr_put
MPI_Barrier MPI_Barrier_init MPI_Bcast MPI_Bcast_c MPI_Bcast_init MPI_Bcast_init_c MPI_Bsend MPI_Bsend_c
MPI_Bsend_init MPI_Bsend_init_c MPI_Buffer_attach MPI_Buffer_attach_c MPI_Buffer_detach MPI_Buffer_detach_c
MPI_Buffer_flush MPI_Buffer_iflush
MPI_Cancel MPI_Cart_coords MPI_Cart_create MPI_Cart_get MPI_Cart_map MPI_Cart_rank MPI_Cart_shift MPI_Cart_sub
MPI_Cartdim_get MPI_Close_port MPI_Comm_accept MPI_Comm_attach_buffer MPI_Comm_attach_buffer_c MPI_Comm_c2f
MPI_Comm_call_errhandler MPI_Comm_compare MPI_Comm_connect MPI_Comm_create MPI_Comm_create_errhandler
MPI_Comm_create_from_group MPI_Comm_create_group MPI_Comm_create_keyval MPI_Comm_delete_attr
MPI_Comm_detach_buffer MPI_Comm_detach_buffer_c MPI_Comm_disconnect MPI_Comm_dup MPI_Comm_dup_with_info
MPI_Comm_f2c MPI_Comm_flush_buffer MPI_Comm_free MPI_Comm_free_keyval MPI_Comm_fromint MPI_Comm_get_attr
MPI_Comm_get_errhandler MPI_Comm_get_info MPI_Comm_get_name MPI_Comm_get_parent MPI_Comm_group MPI_Comm_idup
MPI_Comm_idup_with_info MPI_Comm_iflush_buffer MPI_Comm_join MPI_Comm_rank MPI_Comm_remote_group
MPI_Comm_remote_size MPI_Comm_set_attr MPI_Comm_set_errhandler MPI_Comm_set_info MPI_Comm_set_name MPI_Comm_size
MPI_Comm_spawn MPI_Comm_spawn_multiple MPI_Comm_split MPI_Comm_split_type MPI_Comm_test_inter MPI_Comm_toint
MPI_Compare_and_swap
MPI_Dims_create MPI_Dist_graph_create MPI_Dist_graph_create_adjacent MPI_Dist_graph_neighbors
MPI_Dist_graph_neighbors_count
MPI_Errhandler_c2f MPI_Errhandler_create MPI_Errhandler_f2c MPI_Errhandler_free MPI_Errhandler_fromint
MPI_Errhandler_get MPI_Errhandler_set MPI_Errhandler_toint MPI_Error_class MPI_Error_string MPI_Exscan
MPI_Exscan_c MPI_Exscan_init MPI_Exscan_init_c
MPI_Fetch_and_op MPI_File_c2f MPI_File_call_errhandler MPI_File_close MPI_File_create_errhandler MPI_File_delete
MPI_File_f2c MPI_File_fromint MPI_File_get_amode MPI_File_get_atomicity MPI_File_get_byte_offset
MPI_File_get_errhandler MPI_File_get_group MPI_File_get_info MPI_File_get_position MPI_File_get_position_shared
MPI_File_get_size MPI_File_get_type_extent MPI_File_get_type_extent_c MPI_File_get_view MPI_File_iread
MPI_File_iread_all MPI_File_iread_all_c MPI_File_iread_at MPI_File_iread_at_all MPI_File_iread_at_all_c
MPI_File_iread_at_c MPI_File_iread_c MPI_File_iread_shared MPI_File_iread_shared_c MPI_File_iwrite
MPI_File_iwrite_all MPI_File_iwrite_all_c MPI_File_iwrite_at MPI_File_iwrite_at_all MPI_File_iwrite_at_all_c
MPI_File_iwrite_at_c MPI_File_iwrite_c MPI_File_iwrite_shared MPI_File_iwrite_shared_c MPI_File_open
MPI_File_preallocate MPI_File_read MPI_File_read_all MPI_File_read_all_begin MPI_File_read_all_begin_c
MPI_File_read_all_c MPI_File_read_all_end MPI_File_read_at MPI_File_read_at_all MPI_File_read_at_all_begin
MPI_File_read_at_all_begin_c MPI_File_read_at_all_c MPI_File_read_at_all_end MPI_File_read_at_c MPI_File_read_c
MPI_File_read_ordered MPI_File_read_ordered_begin MPI_File_read_ordered_begin_c MPI_File_read_ordered_c
MPI_File_read_ordered_end MPI_File_read_shared MPI_File_read_shared_c MPI_File_seek MPI_File_seek_shared
MPI_File_set_atomicity MPI_File_set_errhandler MPI_File_set_info MPI_File_set_size MPI_File_set_view
MPI_File_sync MPI_File_toint MPI_File_write MPI_File_write_all MPI_File_write_all_begin
MPI_File_write_all_begin_c MPI_File_write_all_c MPI_File_write_all_end MPI_File_write_at MPI_File_write_at_all
MPI_File_write_at_all_begin MPI_File_write_at_all_begin_c MPI_File_write_at_all_c MPI_File_write_at_all_end
MPI_File_write_at_c MPI_File_write_c MPI_File_write_ordered MPI_File_write_ordered_begin
MPI_File_write_ordered_begin_c MPI_File_write_ordered_c MPI_File_write_ordered_end MPI_File_write_shared
MPI_File_write_shared_c MPI_Finalize MPI_Finalized MPI_Free_mem
MPI_Gather MPI_Gather_c MPI_Gather_init MPI_Gather_init_c MPI_Gatherv MPI_Gatherv_c MPI_Gatherv_init
MPI_Gatherv_init_c MPI_Get MPI_Get_accumulate MPI_Get_accumulate_c MPI_Get_address MPI_Get_c MPI_Get_count
MPI_Get_count_c MPI_Get_elements MPI_Get_elements_c MPI_Get_elements_x MPI_Get_hw_resource_info
MPI_Get_library_version MPI_Get_processor_name MPI_Get_version MPI_Graph_create MPI_Graph_get MPI_Graph_map
MPI_Graph_neighbors MPI_Graph_neighbors_count MPI_Graphdims_get MPI_Grequest_complete MPI_Grequest_start
MPI_Group_c2f MPI_Group_compare MPI_Group_difference MPI_Group_excl MPI_Group_f2c MPI_Group_free
MPI_Group_from_session_pset MPI_Group_fromint MPI_Group_incl MPI_Group_intersection MPI_Group_range_excl
MPI_Group_range_incl MPI_Group_rank MPI_Group_size MPI_Group_toint MPI_Group_translate_ranks MPI_Group_union
MPI_Iallgather MPI_Iallgather_c MPI_Iallgatherv MPI_Iallgatherv_c MPI_Iallreduce MPI_Iallreduce_c MPI_Ialltoall
MPI_Ialltoall_c MPI_Ialltoallv MPI_Ialltoallv_c MPI_Ialltoallw MPI_Ialltoallw_c MPI_Ibarrier MPI_Ibcast
MPI_Ibcast_c MPI_Ibsend MPI_Ibsend_c MPI_Iexscan MPI_Iexscan_c MPI_Igather MPI_Igather_c MPI_Igatherv
MPI_Igatherv_c MPI_Improbe MPI_Imrecv MPI_Imrecv_c MPI_Ineighbor_allgather MPI_Ineighbor_allgather_c
MPI_Ineighbor_allgatherv MPI_Ineighbor_allgatherv_c MPI_Ineighbor_alltoall MPI_Ineighbor_alltoall_c
MPI_Ineighbor_alltoallv MPI_Ineighbor_alltoallv_c MPI_Ineighbor_alltoallw MPI_Ineighbor_alltoallw_c MPI_Info_c2f
MPI_Info_create MPI_Info_create_env MPI_Info_delete MPI_Info_dup MPI_Info_f2c MPI_Info_free MPI_Info_fromint
MPI_Info_get MPI_Info_get_nkeys MPI_Info_get_nthkey MPI_Info_get_string MPI_Info_get_valuelen MPI_Info_set
MPI_Info_toint MPI_Init MPI_Init_thread MPI_Initialized MPI_Intercomm_create MPI_Intercomm_create_from_groups
MPI_Intercomm_merge MPI_Iprobe MPI_Irecv MPI_Irecv_c MPI_Ireduce MPI_Ireduce_c MPI_Ireduce_scatter
MPI_Ireduce_scatter_block MPI_Ireduce_scatter_block_c MPI_Ireduce_scatter_c MPI_Irsend MPI_Irsend_c
MPI_Is_thread_main MPI_Iscan MPI_Iscan_c MPI_Iscatter MPI_Iscatter_c MPI_Iscatterv MPI_Iscatterv_c MPI_Isend
MPI_Isend_c MPI_Isendrecv MPI_Isendrecv_c MPI_Isendrecv_replace MPI_Isendrecv_replace_c MPI_Issend MPI_Issend_c
MPI_Keyval_create MPI_Keyval_free
MPI_Lookup_name
MPI_Message_c2f MPI_Message_f2c MPI_Message_fromint MPI_Message_toint MPI_Mprobe MPI_Mrecv MPI_Mrecv_c
MPI_Neighbor_allgather MPI_Neighbor_allgather_c MPI_Neighbor_allgather_init MPI_Neighbor_allgather_init_c
MPI_Neighbor_allgatherv MPI_Neighbor_allgatherv_c MPI_Neighbor_allgatherv_init MPI_Neighbor_allgatherv_init_c
MPI_Neighbor_alltoall MPI_Neighbor_alltoall_c MPI_Neighbor_alltoall_init MPI_Neighbor_alltoall_init_c
MPI_Neighbor_alltoallv MPI_Neighbor_alltoallv_c MPI_Neighbor_alltoallv_init MPI_Neighbor_alltoallv_init_c
MPI_Neighbor_alltoallw MPI_Neighbor_alltoallw_c MPI_Neighbor_alltoallw_init MPI_Neighbor_alltoallw_init_c
MPI_Op_c2f MPI_Op_commutative MPI_Op_create MPI_Op_create_c MPI_Op_f2c MPI_Op_free MPI_Op_fromint MPI_Op_toint
MPI_Open_port
MPI_Pack MPI_Pack_c MPI_Pack_external MPI_Pack_external_c MPI_Pack_external_size MPI_Pack_external_size_c
MPI_Pack_size MPI_Pack_size_c MPI_Parrived MPI_Pcontrol MPI_Pready MPI_Pready_list MPI_Pready_range
MPI_Precv_init MPI_Probe MPI_Psend_init MPI_Publish_name MPI_Put MPI_Put_c
MPI_Query_thread
MPI_Raccumulate MPI_Raccumulate_c MPI_Recv MPI_Recv_c MPI_Recv_init MPI_Recv_init_c MPI_Reduce MPI_Reduce_c
MPI_Reduce_init MPI_Reduce_init_c MPI_Reduce_local MPI_Reduce_local_c MPI_Reduce_scatter
MPI_Reduce_scatter_block MPI_Reduce_scatter_block_c MPI_Reduce_scatter_block_init
MPI_Reduce_scatter_block_init_c MPI_Reduce_scatter_c MPI_Reduce_scatter_init MPI_Reduce_scatter_init_c
MPI_Register_datarep MPI_Register_datarep_c MPI_Remove_error_class MPI_Remove_error_code MPI_Remove_error_string
MPI_Request_c2f MPI_Request_f2c MPI_Request_free MPI_Request_fromint MPI_Request_get_status
MPI_Request_get_status_all MPI_Request_get_status_any MPI_Request_get_status_some MPI_Request_toint MPI_Rget
MPI_Rget_accumulate MPI_Rget_accumulate_c MPI_Rget_c MPI_Rput MPI_Rput_c MPI_Rsend MPI_Rsend_c MPI_Rsend_init
MPI_Rsend_init_c
MPI_Scan MPI_Scan_c MPI_Scan_init MPI_Scan_init_c MPI_Scatter MPI_Scatter_c MPI_Scatter_init MPI_Scatter_init_c
MPI_Scatterv MPI_Scatterv_c MPI_Scatterv_init MPI_Scatterv_init_c MPI_Send MPI_Send_c MPI_Send_init
MPI_Send_init_c MPI_Sendrecv MPI_Sendrecv_c MPI_Sendrecv_replace MPI_Sendrecv_replace_c
MPI_Session_attach_buffer MPI_Session_attach_buffer_c MPI_Session_c2f MPI_Session_call_errhandler
MPI_Session_create_errhandler MPI_Session_detach_buffer MPI_Session_detach_buffer_c MPI_Session_f2c
MPI_Session_finalize MPI_Session_flush_buffer MPI_Session_fromint MPI_Session_get_errhandler
MPI_Session_get_info MPI_Session_get_nth_pset MPI_Session_get_num_psets MPI_Session_get_pset_info
MPI_Session_iflush_buffer MPI_Session_init MPI_Session_set_errhandler MPI_Session_set_info MPI_Session_toint
MPI_Ssend MPI_Ssend_c MPI_Ssend_init MPI_Ssend_init_c MPI_Start MPI_Startall MPI_Status_c2f MPI_Status_c2f08
MPI_Status_f082c MPI_Status_f082f MPI_Status_f2c MPI_Status_f2f08 MPI_Status_get_error MPI_Status_get_source
MPI_Status_get_tag MPI_Status_set_cancelled MPI_Status_set_elements MPI_Status_set_elements_c
MPI_Status_set_elements_x MPI_Status_set_error MPI_Status_set_source MPI_Status_set_tag
MPI_T_category_changed MPI_T_category_get_categories MPI_T_category_get_cvars MPI_T_category_get_events
MPI_T_category_get_index MPI_T_category_get_info MPI_T_category_get_num MPI_T_category_get_num_events
MPI_T_category_get_pvars MPI_T_cvar_get_index MPI_T_cvar_get_info MPI_T_cvar_get_num MPI_T_cvar_handle_alloc
MPI_T_cvar_handle_free MPI_T_cvar_read MPI_T_cvar_write MPI_T_enum_get_info MPI_T_enum_get_item
MPI_T_event_callback_get_info MPI_T_event_callback_set_info MPI_T_event_copy MPI_T_event_get_index
MPI_T_event_get_info MPI_T_event_get_num MPI_T_event_get_source MPI_T_event_get_timestamp
MPI_T_event_handle_alloc MPI_T_event_handle_free MPI_T_event_handle_get_info MPI_T_event_handle_set_info
MPI_T_event_read MPI_T_event_register_callback MPI_T_event_set_dropped_handler MPI_T_finalize MPI_T_init_thread
MPI_T_pvar_get_index MPI_T_pvar_get_info MPI_T_pvar_get_num MPI_T_pvar_handle_alloc MPI_T_pvar_handle_free
MPI_T_pvar_read MPI_T_pvar_readreset MPI_T_pvar_reset MPI_T_pvar_session_create MPI_T_pvar_session_free
MPI_T_pvar_start MPI_T_pvar_stop MPI_T_pvar_write MPI_T_source_get_info MPI_T_source_get_num
MPI_T_source_get_timestamp MPI_Test MPI_Test_cancelled MPI_Testall MPI_Testany MPI_Testsome MPI_Topo_test
MPI_Type_c2f MPI_Type_commit MPI_Type_contiguous MPI_Type_contiguous_c MPI_Type_create_darray
MPI_Type_create_darray_c MPI_Type_create_f90_complex MPI_Type_create_f90_integer MPI_Type_create_f90_real
MPI_Type_create_hindexed MPI_Type_create_hindexed_block MPI_Type_create_hindexed_block_c
MPI_Type_create_hindexed_c MPI_Type_create_hvector MPI_Type_create_hvector_c MPI_Type_create_indexed_block
MPI_Type_create_indexed_block_c MPI_Type_create_keyval MPI_Type_create_resized MPI_Type_create_resized_c
MPI_Type_create_struct MPI_Type_create_struct_c MPI_Type_create_subarray MPI_Type_create_subarray_c
MPI_Type_delete_attr MPI_Type_dup MPI_Type_extent MPI_Type_f2c MPI_Type_free MPI_Type_free_keyval
MPI_Type_fromint MPI_Type_get_attr MPI_Type_get_contents MPI_Type_get_contents_c MPI_Type_get_envelope
MPI_Type_get_envelope_c MPI_Type_get_extent MPI_Type_get_extent_c MPI_Type_get_extent_x MPI_Type_get_name
MPI_Type_get_true_extent MPI_Type_get_true_extent_c MPI_Type_get_true_extent_x MPI_Type_get_value_index
MPI_Type_hindexed MPI_Type_hvector MPI_Type_indexed MPI_Type_indexed_c MPI_Type_lb MPI_Type_match_size
MPI_Type_set_attr MPI_Type_set_name MPI_Type_size MPI_Type_size_c MPI_Type_size_x MPI_Type_struct MPI_Type_toint
MPI_Type_ub MPI_Type_vector MPI_Type_vector_c
MPI_Unpack MPI_Unpack_c MPI_Unpack_external MPI_Unpack_external_c MPI_Unpublish_name
MPI_Wait MPI_Waitall MPI_Waitany MPI_Waitsome MPI_Win_allocate MPI_Win_allocate_c MPI_Win_allocate_shared
MPI_Win_allocate_shared_c MPI_Win_attach MPI_Win_c2f MPI_Win_call_errhandler MPI_Win_complete MPI_Win_create
MPI_Win_create_c MPI_Win_create_dynamic MPI_Win_create_errhandler MPI_Win_create_keyval MPI_Win_delete_attr
MPI_Win_detach MPI_Win_f2c MPI_Win_fence MPI_Win_flush MPI_Win_flush_all MPI_Win_flush_local
MPI_Win_flush_local_all MPI_Win_free MPI_Win_free_keyval MPI_Win_fromint MPI_Win_get_attr MPI_Win_get_errhandler
MPI_Win_get_group MPI_Win_get_info MPI_Win_get_name MPI_Win_lock MPI_Win_lock_all MPI_Win_post MPI_Win_set_attr
MPI_Win_set_errhandler MPI_Win_set_info MPI_Win_set_name MPI_Win_shared_query MPI_Win_shared_query_c
MPI_Win_start MPI_Win_sync MPI_Win_test MPI_Win_toint MPI_Win_unlock MPI_Win_unlock_all MPI_Win_wait MPI_Wtick
MPI_Wtime
""".split()
)


# -- why a selector selects nothing: hints in terms of the groups and MPIs we know ----------


def unknown_group(name: str, user_groups: Iterable[str]) -> str:
    known = sorted(set(BY_NAME) | set(user_groups))
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else f" (groups: {', '.join(known)})"
    return f"unknown group '{name}'{hint}"


def empty_group(group: Group, enumeration: Enumeration) -> str:
    return f"group '{group.name}' ({group.description}) matches no function of {enumeration.facts.title}"


def glob_miss(glob: str, enumeration: Enumeration, api: Optional[MpiApi]) -> str:
    words = enumeration.facts.title
    if api is not None:
        declared = [f.name for f in api if fnmatch.fnmatchcase(f.name, glob)]
        if declared and all(f.startswith("MPIX_") for f in declared):
            return f"'{glob}' matches only MPIX_ functions, which the enumeration leaves out (add --mpix)"
        if declared:
            return f"'{glob}' matches no interceptable function of {words} (it matches {declared[0]}, left out of the enumeration)"
    known = sorted(fnmatch.filter(KNOWN_FUNCTIONS, glob))
    if known:
        return f"'{glob}' matches no function of {words}: this MPI lacks {_few(known)}"
    return f"'{glob}' matches no function of {words}"


def function_miss(name: str, enumeration: Enumeration, api: Optional[MpiApi]) -> str:
    words = enumeration.facts.title
    if name.startswith(("PMPI_", "PMPIX_")):
        return f"intercept {name[1:]}, not {name}: the core calls {name} at the end of the chain"
    declared = api.get(name) if api is not None else None
    if declared is not None:
        if declared.prefix == "MPIX" and declared.has_pmpi:
            return f"{name} is an MPIX_ extension, which the enumeration leaves out: add --mpix (to the core too)"
        if not declared.has_pmpi:
            return f"{words} declares {name} without a PMPI_ twin: QMPI cannot intercept it"
        return f"{name} is left out of this enumeration by --include/--exclude (build the core the same way)"
    if name in KNOWN_FUNCTIONS:
        extra = ""
        if name.endswith("_c") and not any(n.endswith("_c") for n in enumeration.names):
            extra = " (it declares no large-count _c functions)"
        return f"{words} lacks {name}: its mpi.h does not declare it{extra}"
    close = difflib.get_close_matches(name, enumeration.names, n=3, cutoff=0.75)
    if close:
        return f"unknown MPI function {name}; did you mean {' or '.join(close)}?"
    return f"unknown MPI function {name} ({words} declares no such function)"


def _few(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
