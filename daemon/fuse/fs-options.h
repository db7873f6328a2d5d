/* fs-options.h: what the filesystem layer is configured with (set at start; cache policy live). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum CachePolicy {
        CACHE_NEVER, /* no caching: timeouts 0, FOPEN_DIRECT_IO */
        CACHE_METADATA, /* attributes and entries cached, file data direct */
        CACHE_AUTO, /* short timeouts, page cache kept while attributes are valid */
        CACHE_ALWAYS, /* long timeouts, KEEP_CACHE and CACHE_DIR */
        _CACHE_MAX,
        _CACHE_INVALID = -EINVAL,
} CachePolicy;

const char *cache_policy_to_string(CachePolicy p);
/* Accepts "none" as an alias of "never", like the C virtiofsd. */
CachePolicy cache_policy_from_string(const char *s);

/* --posix-acl[=MODE] and --security-label[=MODE]: never offer the feature to the guest, offer it
 * when the shared directory's filesystem supports it (auto), or always offer it. */
typedef enum FeatureMode {
        FEATURE_NEVER,
        FEATURE_AUTO,
        FEATURE_ALWAYS,
        _FEATURE_MODE_MAX,
        _FEATURE_MODE_INVALID = -EINVAL,
} FeatureMode;

const char *feature_mode_to_string(FeatureMode m);
FeatureMode feature_mode_from_string(const char *s);

/* --inode-file-handles (the Rust virtiofsd's modes; "fallback" is its deprecated alias of prefer). */
typedef enum InodeFileHandles {
        INODE_FILE_HANDLES_NEVER,
        INODE_FILE_HANDLES_PREFER,
        INODE_FILE_HANDLES_MANDATORY,
        _INODE_FILE_HANDLES_MAX,
        _INODE_FILE_HANDLES_INVALID = -EINVAL,
} InodeFileHandles;

/* --privileged-files: what becomes of set-id bits on regular files, device nodes and file
 * capabilities a guest makes (docs/security.md "Privileged files: map, refuse, allow"). map keeps
 * them as authenticated metadata the guest sees and the host does not act on; refuse drops the
 * bits and answers EPERM for the rest; allow makes them for real (--allow-privileged-files). */
typedef enum PrivilegedFiles {
        PRIVILEGED_FILES_MAP,
        PRIVILEGED_FILES_REFUSE,
        PRIVILEGED_FILES_ALLOW,
        _PRIVILEGED_FILES_MAX,
        _PRIVILEGED_FILES_INVALID = -EINVAL,
} PrivilegedFiles;

const char *privileged_files_to_string(PrivilegedFiles m);
PrivilegedFiles privileged_files_from_string(const char *s);

/* The one host attribute map mode keeps its metadata in. No guest request reaches it under any
 * name (the passthrough refuses and hides it, xattr-map.c refuses rules that map onto it). */
#define FS_PRIVILEGED_XATTR "user.vufsd.privileged"
/* The size of the key its authenticator is made with (HMAC-SHA256). */
#define FS_PRIVILEGED_KEY_SIZE 32

typedef struct XattrMap XattrMap;
/* --translate-uid/--translate-gid tables (passthrough/id-translate.h): the filesystem's business,
 * opaque to the FUSE server. */
typedef struct IdTranslate IdTranslate;

typedef struct FsOptions {
        const char *shared_dir;
        /* The share as main resolved it once (share-dir.h), after sandbox_prepare() the mount the
         * sandbox made of it: the root is opened from this fd, never from the path again. Without
         * it (tests that make a filesystem alone) shared_dir is opened. Not owned. */
        bool has_shared_dir_fd;
        int shared_dir_fd;
        CachePolicy cache;
        double timeout; /* entry/attr timeout override in seconds; < 0 = the policy's */
        bool xattr;
        const XattrMap *xattrmap; /* --xattrmap, owned by the Config; NULL = names unchanged */
        /* The host name --xattrmap gives security.capability, when it renames it (owned by the
         * map): removed on write, truncate, chown and O_TRUNC as the kernel removes the real one.
         * NULL: unrenamed, the host kernel does it. */
        const char *capability_xattr;
        /* --translate-uid/--translate-gid, owned by the Config; NULL = ids unchanged. */
        const IdTranslate *translate_uid, *translate_gid;
        bool posix_acl;
        bool security_label;
        bool writeback;
        bool readdirplus;
        bool announce_submounts;
        bool allow_direct_io; /* pass the guest's O_DIRECT to the host (off, as in both virtiofsd) */
        bool allow_mmap; /* FUSE_DIRECT_IO_ALLOW_MMAP: shared mmap of direct-I/O files (never,
                          * metadata) */
        bool killpriv_v2;
        bool preserve_noatime;
        bool readonly;
        bool posix_lock;
        bool flock;
        /* --privileged-files (map by default); map needs the key: without has_privileged_key (or
         * without user xattrs on the share) the passthrough works as refuse. */
        PrivilegedFiles privileged_files;
        bool has_privileged_key;
        uint8_t privileged_key[FS_PRIVILEGED_KEY_SIZE];
        uint64_t max_fds; /* fd budget for guest-held inodes and handles; 0 = derive from RLIMIT_NOFILE */
        InodeFileHandles inode_file_handles; /* --inode-file-handles */
        /* --allow-handles-beyond-share: handles even when the share is a subtree of its filesystem
         * (docs/security.md: they reach the whole filesystem then). */
        bool handles_beyond_share;
        uint64_t dir_buffer_max; /* bytes of directory read-ahead over all handles; 0 = the default */
        uint64_t max_nodes; /* --max-nodes: inodes the guest may make us remember; 0 = the default */
        /* --max-inode-fds: O_PATH fds kept open for inodes at once (the others re-open by name);
         * 0 = the default (a quarter of the fd budget, at most INODE_FDS_DEFAULT_CAP). */
        uint64_t max_inode_fds;
} FsOptions;

/* --max-nodes: the range accepted (the default is the passthrough's, INODE_MAP_DEFAULT_MAX_NODES). */
#define FS_MAX_NODES_MIN 16u
#define FS_MAX_NODES_MAX 100000000u
/* --max-inode-fds: the range accepted. One is enough to work (every request re-opens); tests use a
 * handful so that every request evicts. */
#define FS_MAX_INODE_FDS_MIN 1u
#define FS_MAX_INODE_FDS_MAX 1000000u

#define FS_OPTIONS_DEFAULT                                                                                            \
        (FsOptions) {                                                                                                 \
                .cache = CACHE_AUTO, .timeout = -1, .readdirplus = true, .posix_lock = true, .flock = true,           \
                .announce_submounts = true, .inode_file_handles = INODE_FILE_HANDLES_PREFER,                          \
        }
