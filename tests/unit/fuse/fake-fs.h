/* fake-fs.h: an in-memory FsOps that records what the FUSE server asks of it.
 *
 * For tests of the server's decoding, validation, framing and replies without a host directory
 * (so without root): a flat table of nodes under the root, nodeids never reused, and a record of
 * the last call. Not thread-safe: one request at a time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs-ops.h"

#define FAKE_FS_MAX_NODES 64

typedef struct FakeNode {
        uint64_t nodeid; /* 0: free slot */
        uint64_t parent;
        uint64_t nlookup;
        mode_t mode;
        char name[256];
} FakeNode;

typedef struct FakeFs {
        unsigned calls;      /* every operation but session_reset */
        char last_op[24];    /* name of the last operation called ("" before any) */
        uint64_t last_nodeid;
        char last_name[256]; /* the last name argument, "" for operations without one */
        FsSetattr last_setattr;
        unsigned resets;
        bool writeback;      /* as the last session_reset said */
        /* Returned by the next operation that can fail (then cleared); 0: run normally. */
        int fail_next;
        /* readdir lists "entry-<i>" for i in [0, n_dirents); the cookie after entry i is i + 1. */
        unsigned n_dirents;
        uint64_t next_nodeid;
        FakeNode nodes[FAKE_FS_MAX_NODES];
} FakeFs;

extern const FsOps fake_fs_ops;

void fake_fs_init(FakeFs *f);
/* The node with that nodeid, or NULL. FS_ROOT_ID always exists. */
FakeNode *fake_fs_node(FakeFs *f, uint64_t nodeid);
