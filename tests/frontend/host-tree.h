/* host-tree.h: Check helpers of the frontend tests where the host changes the share under a guest
 * (test-frontend-host-moves, test-frontend-inode-fds): the host's side by path relative to the
 * harness directory, a sandboxed vufsd as the caller or as nobody, and the guest's requests that
 * must be answered (not a protocol failure or a timeout). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/fuse.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"

/* The sandbox modes the cases run in; a loop test's _i picks mode _i % 3, nobody for _i >= 3. */
extern const char *const fe_tree_sandboxes[3];

/* The host's side, rel relative to h->dir; each asserts its call worked. */
void fe_host_path(FeHarness *h, char *buf, size_t size, const char *rel);
void fe_host_mkdir(FeHarness *h, const char *rel);
void fe_host_write(FeHarness *h, const char *rel, const char *data);
void fe_host_rename(FeHarness *h, const char *from, const char *to);
void fe_host_symlink(FeHarness *h, const char *target, const char *rel);
/* The tree both suites start from: DIR/outside/secret.txt (secret) next to the share, and in it
 * a/b/c, a/b/inner.txt, file and d/f (the last three hold inside). */
void fe_host_make_tree(FeHarness *h, const char *secret, const char *inside);
/* Everything under h->dir/share (the share included) to uid, so that a vufsd as uid may change it. */
void fe_host_chown_share(FeHarness *h, uid_t uid);

/* A loop test running fn(mode, nobody): _i is the sandbox mode (0-2) with vufsd as the caller, the
 * same plus 3 with vufsd as nobody (fe_tree_add_modes()). */
#define FE_TREE_TEST(fn)                                                                                              \
        START_TEST(test_##fn) {                                                                                       \
                fn(_i % 3, _i >= 3);                                                                                  \
        }                                                                                                             \
        END_TEST

/* Adds the loop test t in every sandbox mode as the caller and as nobody; without root only as the
 * caller (nobody's daemon needs setpriv and chown), and a root_only case not at all. */
struct TCase;
struct TTest;
void fe_tree_add_modes(struct TCase *tc, const struct TTest *t, bool root_only);

/* vufsd with argv (NULL-terminated) as the caller, or as nobody (the share given to nobody), and a
 * client past INIT. */
void fe_tree_start(FeHarness *h, const char *const *argv, bool nobody, Frontend **ret_fe, FeFuse **ret_c);

/* r, asserted to be an answer of the daemon (anything but -EPROTO or -ETIMEDOUT) to what. */
int fe_tree_answered(FeFuse *c, int r, const char *what);
/* LOOKUP (e may be NULL), and the nodeid of one that must succeed. */
int fe_tree_lookup(FeFuse *c, uint64_t parent, const char *name, struct fuse_entry_out *e);
uint64_t fe_tree_node(FeFuse *c, uint64_t parent, const char *name);
/* The contents of a regular file node (OPEN, READ, RELEASE) as a string, or a negative errno. */
int fe_tree_read(FeFuse *c, uint64_t nodeid, char *buf, size_t size);
