/* passthrough.h: the FsOps implementation over a host directory. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs-ops.h"
#include "fs-options.h"
#include "util.h"

typedef struct Passthrough Passthrough;

extern const FsOps passthrough_ops;

/* Opens opts->shared_dir as the root (nodeid 1). */
int passthrough_new(Passthrough **ret, const FsOptions *opts);
Passthrough *passthrough_free(Passthrough *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(Passthrough *, passthrough_free);

/* Process-wide preparation, called once from main before threads start: drops supplementary
 * groups (CVE-2022-0358) and raises RLIMIT_NOFILE within the system's limits (CVE-2020-10717;
 * rlimit_nofile 0 = default). Returns the resulting fd limit. */
int passthrough_drop_supplementary_groups(void);
int64_t passthrough_raise_fd_limit(uint64_t rlimit_nofile);

/* For tests and statistics. */
unsigned passthrough_inode_count(Passthrough *p);
unsigned passthrough_handle_count(Passthrough *p);
uint64_t passthrough_fds_used(Passthrough *p);
/* The budgets in force (options or their defaults): fds, and nodes the guest may make us remember. */
uint64_t passthrough_fd_budget_max(Passthrough *p);
uint64_t passthrough_max_nodes(Passthrough *p);
/* The bound on the POSIX lock ranges guest owners may hold together (LOCK_RANGES_MAX); smaller in
 * tests, which cannot make a million ranges quickly. */
void passthrough_set_lock_ranges_max(Passthrough *p, int64_t max);

/* The guest's locks a migration's load found held on this host ("pending", locks.c,
 * docs/migration.md): an fd (eventfd) that becomes readable when locks become pending, for the
 * serving loop to start retrying; and one retry of every pending lock (each taken, or lost once
 * --migration-lock-timeout passed), returning how many are still pending: the loop retries every
 * 10 ms while that is not 0. */
int passthrough_locks_pending_fd(Passthrough *p);
size_t passthrough_locks_retry(Passthrough *p);
/* Locks pending now, and lost since start. */
void passthrough_lock_counts(Passthrough *p, uint64_t *pending, uint64_t *lost);
/* --max-inode-fds in force (option or default), and the node fds in its clock now. */
uint64_t passthrough_max_inode_fds(Passthrough *p);
uint64_t passthrough_inode_fds(Passthrough *p);
/* --inode-file-handles: whether inodes are remembered by handle (decided at start), and the mount
 * fds held for them. */
bool passthrough_uses_handles(Passthrough *p);
/* This process took over a guest from a serving process that died or stopped for an upgrade
 * (docs/survival.md), the generation-th since the first: node ids it does not know answer ESTALE,
 * not EBADF (passthrough-internal.h, unknown_node()); and the node ids and fhs it issues from now on
 * start past any the earlier processes could have issued (generation << 40 in their sequences), so
 * an id the guest still holds from before, known here or not, never names a new file. After any
 * restore of the session. */
void passthrough_took_over(Passthrough *p, unsigned generation);
/* --privileged-files as it works: map falls back to refuse without a key or user xattrs. */
PrivilegedFiles passthrough_privileged_files(Passthrough *p);
unsigned passthrough_mount_fd_count(Passthrough *p);
