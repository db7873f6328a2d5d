/* config-verify.c: the checks of a parsed configuration, once the command line and the file are
 * read: paths made absolute, the share's filesystem asked what it supports, combinations refused. */
#include "config-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "capabilities.h"
#include "log.h"

static int make_absolute(char **path) {
        char cwd[PATH_MAX];
        char *p;

        if (!*path || (*path)[0] == '/')
                return 0;
        if (!getcwd(cwd, sizeof cwd))
                return negative_errno();
        if (streq(*path, "."))
                p = strdup(cwd);
        else if (asprintf(&p, "%s/%s", streq(cwd, "/") ? "" : cwd, *path) < 0)
                p = NULL;
        if (!p)
                return -ENOMEM;
        free(*path);
        *path = p;
        return 0;
}

/* Whether the share's filesystem takes the given xattr namespace: getxattr answers ENODATA (none
 * set) or a value where it does, EOPNOTSUPP where it does not. */
static bool share_supports_xattr(const char *dir, const char *name) {
        char buf[1];
        return getxattr(dir, name, buf, 0) >= 0 || (errno != EOPNOTSUPP && errno != ENOTSUP);
}

int config_verify(Config *c) {
        const char *why = NULL;
        int r;

        resolve_capabilities(c);
        if (!c->shared_dir)
                return usage_error("--shared-dir (or -o source=) is required");
        if (c->listen_fd >= 0 && c->socket_path)
                return usage_error("--fd excludes --socket-path and --socket");
        if (c->listen_fd >= 0 && c->socket_group)
                return usage_error("--socket-group applies to --socket-path only, not to --fd");
        /* A key no mode reads is a configuration that says something it does not do. */
        if (c->privileged_key_file && c->fs.privileged_files != PRIVILEGED_FILES_MAP)
                return usage_error("--privileged-files-key applies to --privileged-files=map only, not to %s",
                                   privileged_files_to_string(c->fs.privileged_files));
        if (c->migration_mode == MIGRATION_FILE_HANDLES && c->migration_confirm_paths)
                return usage_error("--migration-confirm-paths cannot be used with --migration-mode=file-handles "
                                   "(it is unnecessary there)");
        if (c->migration_mode == MIGRATION_FILE_HANDLES && c->migration_verify_handles)
                return usage_error("--migration-verify-handles cannot be used with --migration-mode=file-handles "
                                   "(it is unnecessary there)");
        if ((c->translate_uid.n > 0 || c->translate_gid.n > 0) && c->posix_acl_mode != FEATURE_NEVER)
                return usage_error("--translate-uid/--translate-gid cannot be used with --posix-acl: translating ids "
                                   "would break ACLs");
        /* A D-Bus address always has a transport prefix ("unix:path=..."). */
        if (c->bus && !streq(c->bus, "system") && !streq(c->bus, "session") && !streq(c->bus, "none") &&
            !strchr(c->bus, ':'))
                return usage_error("--bus must be system, session, none or a D-Bus address like "
                                   "unix:path=/run/my-bus, got \"%s\"",
                                   c->bus);
        r = config_resolve_threads(c->threads_given, c->thread_pool_size_given, &c->thread_mode, &c->pool_size, &why);
        if (r < 0)
                return usage_error("%s", why);

        /* File handles need CAP_DAC_READ_SEARCH after the lockdown (open_by_handle_at): a --modcaps
         * that removes it means no handles, which mandatory cannot accept. */
        if (c->fs.inode_file_handles != INODE_FILE_HANDLES_NEVER && !(c->modcaps_keep & capabilities_file_handles())) {
                if (c->fs.inode_file_handles == INODE_FILE_HANDLES_MANDATORY)
                        return usage_error("--inode-file-handles=mandatory needs CAP_DAC_READ_SEARCH, which --modcaps "
                                           "removes");
                c->fs.inode_file_handles = INODE_FILE_HANDLES_NEVER;
                c->handles_dropped_by_modcaps = true;
        }

        /* Accepted as the Rust virtiofsd accepts them, refused where the value asks for something
         * vufsd does not do yet (issue 16), rather than ignored. */
        /* The maps are a user namespace's (userns.h): without a sandbox there is none. Inside,
         * the daemon is uid/gid 0 of the namespace, so 0 must be mapped (it is the guest's root
         * too; docs/id-mapping.md). */
        /* libvirt passes maps without --sandbox; the default is the namespace sandbox except in
         * sanitizer builds (sandbox_mode_default()), where a map still asks for it. */
        if ((c->uid_map.n > 0 || c->gid_map.n > 0) && !c->sandbox_given)
                c->sandbox = SANDBOX_NAMESPACE;
        if ((c->uid_map.n > 0 || c->gid_map.n > 0) && c->sandbox == SANDBOX_NONE)
                return usage_error("--uid-map/--gid-map need --sandbox=namespace or --sandbox=chroot: they map the "
                                   "user namespace the sandbox creates");
        if (c->uid_map.n > 0 && !id_map_contains(&c->uid_map, 0))
                return usage_error("--uid-map: no entry maps namespace uid 0 (the daemon's own uid in the namespace "
                                   "and the guest's root), e.g. :0:HOST_UID:COUNT:");
        if (c->gid_map.n > 0 && !id_map_contains(&c->gid_map, 0))
                return usage_error("--gid-map: no entry maps namespace gid 0 (the daemon's own gid in the namespace "
                                   "and the guest's root group), e.g. :0:HOST_GID:COUNT:");

        /* Relative --shared-dir and socket paths (Podman runs "--shared-dir ." in the directory):
         * the sandbox changes the root and the working directory, so resolve them now. */
        r = make_absolute(&c->shared_dir);
        if (r >= 0)
                r = make_absolute(&c->socket_path);
        if (r >= 0)
                r = make_absolute(&c->privileged_key_file);
        if (r < 0)
                return usage_error("cannot resolve a relative path: %s", strerror(-r));

        /* What the Rust virtiofsd derives: ACLs and labels need xattrs; no READDIRPLUS without a
         * cache to put its entries in. */
        if (c->posix_acl_mode != FEATURE_NEVER || c->security_label_mode != FEATURE_NEVER)
                c->fs.xattr = true;
        if (c->fs.cache == CACHE_NEVER)
                c->fs.readdirplus = false;
        c->fs.posix_acl =
                c->posix_acl_mode == FEATURE_ALWAYS ||
                (c->posix_acl_mode == FEATURE_AUTO && share_supports_xattr(c->shared_dir, "system.posix_acl_access"));
        c->fs.security_label =
                c->security_label_mode == FEATURE_ALWAYS ||
                (c->security_label_mode == FEATURE_AUTO && share_supports_xattr(c->shared_dir, "security.selinux"));
        c->fs.shared_dir = c->shared_dir;
        c->fs.xattrmap = c->xattrmap;
        c->fs.capability_xattr = xattr_map_capability_name(c->xattrmap);
        /* Translation is applied only where it changes something (docs/id-mapping.md). */
        c->fs.translate_uid = id_translate_is_empty(&c->translate_uid.table) ? NULL : &c->translate_uid.table;
        c->fs.translate_gid = id_translate_is_empty(&c->translate_gid.table) ? NULL : &c->translate_gid.table;
        return 0;
}
