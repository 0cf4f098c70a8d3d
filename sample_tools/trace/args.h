/* args.h: the rare and long parts of a call record made by role (args.c), for record.h's
 * inline code. */
#ifndef QMPI_TRACE_ARGS_H
#define QMPI_TRACE_ARGS_H
#include "state.h"

HIDDEN int64_t trace_side_bytes(struct traced *t, const int *counts, const MPI_Count *counts_c, MPI_Datatype type,
                                const MPI_Datatype *types, int peers, int *type_id);
/* 1 if the status changed the record. */
HIDDEN int trace_record_status(struct traced *t, const struct trace_args *a);
/* The communicator of the message an Mprobe matched into t->comm: 1, or 0 if unknown. */
HIDDEN int trace_take_message(struct traced *t, MPI_Message message);
HIDDEN void trace_remember_message(struct traced *t, MPI_Message message);
/* MPI_File_delete's file: the id of a file named, with no handle. */
HIDDEN int trace_deleted_file_id(struct traced *t, const char *name);
HIDDEN void trace_record_made(struct traced *t, const struct trace_args *a, int failed);

#endif
