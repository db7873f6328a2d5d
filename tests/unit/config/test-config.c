/* test-config.c: the command line parsed into typed values: the Rust virtiofsd's options and -o
 * keys, the C virtiofsd's -o forms, last-wins, RUST_LOG, the id map syntax, the thread mode rules,
 * and --help, the man page and docs/launchers.md checked against the parser's option list. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "capabilities.h"
#include "config.h"
#include "device.h"
#include "test-args.h"
#include "test-main.h"

#define PARSE(c, ...) test_parse_argv(c, (const char *const[]){ __VA_ARGS__, NULL })

START_TEST(test_rust_options_typed) {
        Config c;

        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--socket-path=/run/s", "--cache=metadata", "--sandbox=chroot",
                               "--seccomp=log", "--modcaps=-mknod:+sys_admin", "--thread-pool-size=3", "--allow-mmap",
                               "--no-readdirplus", "--writeback", "--allow-direct-io", "--killpriv-v2",
                               "--preserve-noatime", "--no-announce-submounts", "--tag=myfs", "--posix-acl=auto",
                               "--security-label", "--rlimit-nofile=4096", "--inode-file-handles=prefer",
                               "--migration-mode=find-paths", "--migration-on-error=guest-error",
                               "--migration-verify-handles", "--syslog", "--log-level=warn",
                               "--xattrmap=:map::user.virtiofs.:"),
                         0);
        ck_assert_int_eq(c.fs.cache, CACHE_METADATA);
        ck_assert_int_eq(c.sandbox, SANDBOX_CHROOT);
        ck_assert_int_eq(c.seccomp, SYSCALL_FILTER_LOG);
        {
                uint64_t want = capabilities_default(false);
                ck_assert_int_eq(capabilities_modify(&want, "-mknod:+sys_admin"), 0);
                ck_assert_uint_eq(c.capabilities, want);
                ck_assert_uint_ne(c.capabilities, capabilities_default(false));
        }
        ck_assert_int_eq(c.thread_pool_size_given, 3);
        ck_assert(c.fs.allow_mmap && !c.fs.readdirplus && c.fs.writeback && c.fs.allow_direct_io);
        ck_assert(c.fs.killpriv_v2 && c.fs.preserve_noatime && !c.fs.announce_submounts);
        ck_assert_str_eq(c.tag, "myfs");
        ck_assert_int_eq(c.posix_acl_mode, FEATURE_AUTO);
        ck_assert_int_eq(c.security_label_mode, FEATURE_ALWAYS); /* the bare flag */
        ck_assert_uint_eq(c.rlimit_nofile, 4096);
        ck_assert_int_eq(c.fs.inode_file_handles, INODE_FILE_HANDLES_PREFER);
        ck_assert_int_eq(c.migration_on_error, MIGRATION_ON_ERROR_GUEST_ERROR);
        ck_assert(c.migration_verify_handles && c.migration_given);
        ck_assert(c.syslog);
        ck_assert_int_eq(c.log_level, LOG_WARNING);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert(c.fs.xattr); /* implied by the ACL and label modes and the map */
        ck_assert_ptr_nonnull(c.fs.xattrmap);
        ck_assert_uint_eq(xattr_map_n_rules(c.fs.xattrmap), 2);
        ck_assert(c.fs.security_label);
        ck_assert_int_eq(c.thread_mode, THREAD_MODE_POOL);
        ck_assert_uint_eq(c.pool_size, 3);
        config_done(&c);
}
END_TEST

/* Every --inode-file-handles mode is accepted; whether the share can use handles is decided when
 * it is opened (test-frontend-handles). */
START_TEST(test_file_handle_modes) {
        Config c;

        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--fd=3", "--inode-file-handles=mandatory",
                               "--allow-handles-beyond-share"),
                         0);
        ck_assert_int_eq(c.fs.inode_file_handles, INODE_FILE_HANDLES_MANDATORY);
        ck_assert(c.fs.handles_beyond_share);
        ck_assert_int_eq(config_verify(&c), 0);
        config_done(&c);
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--fd=3", "--inode-file-handles=never"), 0);
        ck_assert_int_eq(c.fs.inode_file_handles, INODE_FILE_HANDLES_NEVER);
        ck_assert_int_eq(config_verify(&c), 0);
        config_done(&c);
        /* Without the capability handles need, prefer is never. */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--fd=3", "--modcaps=-dac_read_search"), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_int_eq(c.fs.inode_file_handles, INODE_FILE_HANDLES_NEVER);
        ck_assert(c.handles_dropped_by_modcaps);
        config_done(&c);
}
END_TEST

START_TEST(test_defaults) {
        Config c;

        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--fd=3"), 0);
        ck_assert(c.fs.announce_submounts); /* on by default, as in the Rust virtiofsd */
        ck_assert(!c.fs.killpriv_v2 && !c.fs.writeback && !c.fs.allow_mmap && c.fs.readdirplus);
        ck_assert_int_eq(c.posix_acl_mode, FEATURE_NEVER);
        /* prefer, as in the Rust virtiofsd since 2025: handles where the share allows them */
        ck_assert_int_eq(c.fs.inode_file_handles, INODE_FILE_HANDLES_PREFER);
        ck_assert(!c.fs.handles_beyond_share);
        ck_assert_int_eq(c.sandbox, sandbox_mode_default());
        ck_assert_int_eq(c.seccomp, syscall_filter_default());
        ck_assert_uint_eq(c.capabilities, capabilities_default(false));
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_int_eq(c.thread_mode, THREAD_MODE_INLINE); /* --thread-pool-size 0 (default) */
        ck_assert(!c.fs.posix_acl && !c.fs.security_label);
        ck_assert_uint_eq(c.poll_us, DEVICE_POLL_AUTO); /* adaptive busy polling by default */
        config_done(&c);

        /* --poll-us: auto, a fixed window, or 0 = off */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--poll-us=50", "--poll-us=auto"), 0);
        ck_assert_uint_eq(c.poll_us, DEVICE_POLL_AUTO);
        config_done(&c);
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--poll-us=auto", "--poll-us=50"), 0);
        ck_assert_uint_eq(c.poll_us, 50);
        config_done(&c);
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--poll-us=0"), 0);
        ck_assert_uint_eq(c.poll_us, 0);
        config_done(&c);

        /* --cache=never turns READDIRPLUS off, as in the Rust virtiofsd */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/srv", "--fd=3", "--cache=never"), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert(!c.fs.readdirplus);
        config_done(&c);
}
END_TEST

START_TEST(test_last_wins) {
        Config c;

        ck_assert_int_eq(PARSE(&c, "--shared-dir=/a", "--shared-dir=/b", "--cache=never", "--cache=always",
                               "--no-announce-submounts", "--announce-submounts", "--killpriv-v2", "--no-killpriv-v2",
                               "--modcaps=+sys_admin", "--modcaps=-chown", "--sandbox=none", "--sandbox=chroot",
                               "--posix-acl=always", "--posix-acl=never", "--fd=4", "--fd=5"),
                         0);
        ck_assert_str_eq(c.shared_dir, "/b");
        ck_assert_int_eq(c.fs.cache, CACHE_ALWAYS);
        ck_assert(c.fs.announce_submounts);
        ck_assert(!c.fs.killpriv_v2);
        {
                uint64_t want = capabilities_default(false);
                ck_assert_int_eq(capabilities_modify(&want, "-chown"), 0);
                ck_assert_uint_eq(c.capabilities, want); /* the earlier +sys_admin is gone */
        }
        ck_assert_int_eq(c.sandbox, SANDBOX_CHROOT);
        ck_assert_int_eq(c.posix_acl_mode, FEATURE_NEVER);
        ck_assert_int_eq(c.listen_fd, 5);
        config_done(&c);

        /* id maps add entries instead */
        ck_assert_int_eq(PARSE(&c, "--uid-map=:0:0:10:", "--uid-map=:10:10:5:", "--gid-map=:0:0:1:"), 0);
        ck_assert_uint_eq(c.uid_map.n, 2);
        ck_assert_uint_eq(c.uid_map.e[1].inside, 10);
        ck_assert_uint_eq(c.uid_map.e[1].count, 5);
        ck_assert_uint_eq(c.gid_map.n, 1);
        config_done(&c);
}
END_TEST

START_TEST(test_o_forms) {
        Config c;

        /* Rust virtiofsd keys */
        ck_assert_int_eq(PARSE(&c, "-o", "source=/x,,y,cache=none,loglevel=debug,sandbox=chroot,xattr,no_readdirplus",
                               "-o",
                               "writeback,allow_direct_io,killpriv_v2,posix_acl,security_label,announce_submounts",
                               "-o", "modcaps=+sys_admin,no_posix_lock,no_flock"),
                         0);
        ck_assert_str_eq(c.shared_dir, "/x,y"); /* ",," is a literal comma */
        ck_assert_int_eq(c.fs.cache, CACHE_NEVER);
        ck_assert_int_eq(c.log_level, LOG_DEBUG);
        ck_assert_int_eq(c.sandbox, SANDBOX_CHROOT);
        ck_assert(c.fs.xattr && !c.fs.readdirplus && c.fs.writeback && c.fs.allow_direct_io && c.fs.killpriv_v2);
        ck_assert_int_eq(c.posix_acl_mode, FEATURE_ALWAYS);
        ck_assert_int_eq(c.security_label_mode, FEATURE_ALWAYS);
        ck_assert(!c.fs.posix_lock && !c.fs.flock);
        ck_assert(c.deprecated_o);
        config_done(&c);

        /* the C virtiofsd's: vhost_user_socket, log_level, timeout, the no_ forms */
        ck_assert_int_eq(PARSE(&c, "-o", "vhost_user_socket=/run/v.sock,source=/s,log_level=warn,timeout=2.5", "-o",
                               "no_xattr,no_killpriv_v2,no_allow_direct_io,no_posix_acl,no_security_label,norace"),
                         0);
        ck_assert_str_eq(c.socket_path, "/run/v.sock");
        ck_assert_int_eq(c.log_level, LOG_WARNING);
        ck_assert(c.fs.timeout > 2.49 && c.fs.timeout < 2.51);
        ck_assert(!c.fs.xattr && !c.fs.killpriv_v2 && !c.fs.allow_direct_io);
        ck_assert_int_eq(c.posix_acl_mode, FEATURE_NEVER);
        config_done(&c);

        ck_assert_int_lt(PARSE(&c, "-o", "source=/s,frobnicate"), 0);
        config_done(&c);
        ck_assert_int_lt(PARSE(&c, "-o", "cache=sometimes"), 0);
        config_done(&c);
        ck_assert_int_lt(PARSE(&c, "-o", "timeout=abc"), 0);
        config_done(&c);
}
END_TEST

START_TEST(test_short_and_deprecated) {
        Config c;

        ck_assert_int_eq(
                PARSE(&c, "-d", "-f", "--socket=/run/old.sock", "--shared-dir=/s", "--inode-file-handles=fallback"),
                0);
        ck_assert_int_eq(c.log_level, LOG_DEBUG);
        ck_assert(c.deprecated_d && c.deprecated_f && c.deprecated_socket && c.deprecated_fallback);
        ck_assert_str_eq(c.socket_path, "/run/old.sock");
        ck_assert_int_eq(c.fs.inode_file_handles, INODE_FILE_HANDLES_PREFER);
        config_done(&c);
}
END_TEST

START_TEST(test_usage_errors) {
        static const char *const bad[][3] = {
                { "--inode-file-handles", "never", NULL }, /* needs the '=' */
                { "--inode-file-handles=always", NULL },
                { "--posix-acl=yes", NULL },
                { "--security-label=on", NULL },
                { "--tag=", NULL },
                { "--tag=0123456789012345678901234567890123456", NULL }, /* 37 bytes */
                { "--cache=fast", NULL },
                { "--sandbox=jail", NULL },
                { "--seccomp=allow", NULL },
                { "--modcaps=chown", NULL },
                { "--log-level=loud", NULL },
                { "--thread-pool-size=-1", NULL },
                { "--thread-pool-size=1025", NULL },
                { "--threads=many", NULL },
                { "--poll-us=automatic", NULL },
                { "--poll-us=1000001", NULL },
                { "--poll-us=4294967295", NULL }, /* the internal auto sentinel is no number to give */
                { "--poll-us=-1", NULL },
                { "--fd=x", NULL },
                { "--num-request-queues=0", NULL },
                { "--migration-mode=copy", NULL },
                { "--migration-on-error=ignore", NULL },
                { "--privileged-files=yes", NULL },
                { "--privileged-files", NULL }, /* needs its mode */
                { "--uid-map=0:0:1:", NULL },
                { "--uid-map=:0:0:1", NULL },
                { "--uid-map=:0:0:0:", NULL },
                { "--uid-map=:a:0:1:", NULL },
                { "--uid-map=:4294967295:0:2:", NULL },
                { "--translate-uid=map:0:0", NULL },
                { "--translate-uid=mapp:0:0:1", NULL },
                { "--translate-gid=forbid-guest:0:0:1", NULL },
                { "--xattrmap=:ok:all::", NULL }, /* the last rule lacks its separator */
                { "--xattrmap=:map::user.virtiofs.::ok:all:::", NULL }, /* map must be last */
                { "stray", NULL },
        };
        Config c;

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                const char *args[6] = { "--shared-dir=/s", bad[i][0], bad[i][1], NULL };
                ck_assert_msg(test_parse_argv(&c, args) < 0, "accepted: %s %s", bad[i][0], bad[i][1] ?: "");
                config_done(&c);
        }
}
END_TEST

START_TEST(test_verify_refusals) {
        static const char *const bad[][4] = {
                { "--fd=3", "--socket-path=/run/x", NULL },
                { "--fd=3", "--socket-group=kvm", NULL },
                { "--migration-mode=file-handles", "--migration-confirm-paths", NULL },
                { "--migration-mode=file-handles", "--migration-verify-handles", NULL },
                { "--inode-file-handles=mandatory", "--modcaps=-dac_read_search", NULL },
                { "--translate-uid=map:0:0:1", "--posix-acl", NULL },
                { "--uid-map=:1:1000:1:", NULL }, /* namespace uid 0 unmapped */
                { "--sandbox=none", "--gid-map=:0:100000:10:", NULL }, /* no user namespace */
                { "--threads=pool", "--thread-pool-size=0", NULL },
                /* a key only map mode reads */
                { "--privileged-files=refuse", "--privileged-files-key=/k", NULL },
                { "--allow-privileged-files", "--privileged-files-key=/k", NULL },
        };
        Config c;

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                const char *args[6] = { "--shared-dir=/s", bad[i][0], bad[i][1], NULL };
                ck_assert_int_eq(test_parse_argv(&c, args), 0);
                ck_assert_msg(config_verify(&c) < 0, "verified: %s %s", bad[i][0], bad[i][1] ?: "");
                config_done(&c);
        }
        /* maps (test-id-map has the rest), identity translations */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/s", "--sandbox=namespace", "--uid-map=:0:100000:65536:",
                               "--gid-map=:0:0:1:", "--translate-uid=map:5:5:10", "--translate-gid=squash-host:7:7:1"),
                         0);
        ck_assert_int_eq(config_verify(&c), 0);
        config_done(&c);
        /* A map without --sandbox: libvirt's session form passes none. The map asks for the user
         * namespace, so the default (none in sanitizer builds) must not refuse it. */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/s", "--uid-map=:0:0:65536:", "--gid-map=:0:0:65536:"), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_int_eq(c.sandbox, SANDBOX_NAMESPACE);
        config_done(&c);
        ck_assert_int_eq(PARSE(&c, "--fd=3"), 0);
        ck_assert_int_lt(config_verify(&c), 0); /* no shared directory */
        config_done(&c);
}
END_TEST

START_TEST(test_translations) {
        Config c;
        uint32_t h;

        /* Every type, several entries, both families; fs points at the tables. */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/s", "--translate-uid=squash-guest:0:1000:65536",
                               "--translate-uid=host:1000:0:1", "--translate-uid=forbid-guest:65536:10",
                               "--translate-gid=map:0:2000:10", "--translate-gid=squash-host:0:0:5"),
                         0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_uint_eq(c.translate_uid.n, 3);
        ck_assert_ptr_eq(c.fs.translate_uid, &c.translate_uid.table);
        ck_assert_ptr_eq(c.fs.translate_gid, &c.translate_gid.table);
        ck_assert_int_eq(id_translate_to_host(c.fs.translate_uid, 7, &h), 0);
        ck_assert_uint_eq(h, 1000);
        ck_assert_int_eq(id_translate_to_host(c.fs.translate_uid, 65540, &h), -EPERM);
        ck_assert_uint_eq(id_translate_to_guest(c.fs.translate_gid, 2003), 3);
        config_done(&c);
        /* None given: nothing to apply. */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/s"), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_ptr_null(c.fs.translate_uid);
        ck_assert_ptr_null(c.fs.translate_gid);
        config_done(&c);
        /* Overlaps in one direction are refused, across directions they are not. */
        ck_assert_int_lt(PARSE(&c, "--translate-uid=guest:0:0:10", "--translate-uid=squash-guest:9:5:1"), 0);
        config_done(&c);
        ck_assert_int_lt(PARSE(&c, "--translate-gid=map:0:100:10", "--translate-gid=host:105:0:1"), 0);
        config_done(&c);
        ck_assert_int_eq(PARSE(&c, "--translate-uid=guest:0:100:10", "--translate-uid=host:0:100:10"), 0);
        config_done(&c);
        ck_assert_int_lt(PARSE(&c, "--translate-uid=map:0:4294967290:10"), 0); /* target overflow */
        config_done(&c);
}
END_TEST

START_TEST(test_overlapping_maps) {
        Config c;

        ck_assert_int_lt(PARSE(&c, "--uid-map=:0:0:10:", "--uid-map=:5:100:10:"), 0); /* inside */
        config_done(&c);
        ck_assert_int_lt(PARSE(&c, "--uid-map=:0:0:10:", "--uid-map=:100:5:10:"), 0); /* outside */
        config_done(&c);
        ck_assert_int_eq(PARSE(&c, "--uid-map=:0:0:10:", "--uid-map=:10:10:10:"), 0); /* adjacent */
        config_done(&c);
}
END_TEST

START_TEST(test_id_syntax) {
        IdMapEntry m;
        IdTranslateEntry t;

        ck_assert_int_eq(config_parse_id_map(":0:100000:65536:", &m), 0);
        ck_assert_uint_eq(m.inside, 0);
        ck_assert_uint_eq(m.outside, 100000);
        ck_assert_uint_eq(m.count, 65536);
        ck_assert_int_eq(config_parse_id_map(":0:0:4294967296:", &m), -EINVAL);
        ck_assert_int_eq(config_parse_id_map(":0:0:4294967295:", &m), 0);
        ck_assert_int_eq(config_parse_id_map("::0:1:", &m), -EINVAL);
        ck_assert_int_eq(config_parse_id_map(":0:0:1::", &m), -EINVAL);
        ck_assert_int_eq(config_parse_id_map(":+1:0:1:", &m), -EINVAL);
        ck_assert_int_eq(config_parse_id_map("", &m), -EINVAL);
        ck_assert_int_eq(config_parse_id_map(NULL, &m), -EINVAL);

        ck_assert_int_eq(config_parse_id_translate("map:0:1000:1", &t), 0);
        ck_assert_int_eq(t.type, ID_TRANSLATE_MAP);
        ck_assert_uint_eq(t.target, 1000);
        ck_assert_int_eq(config_parse_id_translate("squash-host:0:1000:4294967295", &t), 0);
        ck_assert_int_eq(config_parse_id_translate("forbid-guest:100:10", &t), 0);
        ck_assert_int_eq(t.type, ID_TRANSLATE_FORBID_GUEST);
        ck_assert_uint_eq(t.source, 100);
        ck_assert_uint_eq(t.count, 10);
        ck_assert_int_eq(config_parse_id_translate("forbid-guest:100:10:1", &t), -EINVAL);
        ck_assert_int_eq(config_parse_id_translate("guest:0:0:0", &t), -EINVAL);
        ck_assert_int_eq(config_parse_id_translate("host:4294967295:0:2", &t), -EINVAL);
        ck_assert_int_eq(config_parse_id_translate("guest::0:1", &t), -EINVAL);
        ck_assert_int_eq(config_parse_id_translate("guest:0:0:1:", &t), -EINVAL);
        ck_assert_int_eq(config_parse_id_translate("guest:0:4294967295:1", &t), -EINVAL);
        ck_assert_int_eq(config_parse_id_translate("Map/1/2/3", &t), 0); /* the Rust parser's forms */
        ck_assert_uint_eq(t.count, 3);
}
END_TEST

START_TEST(test_rust_log) {
        Config c;

        ck_assert_int_eq(PARSE(&c, "--shared-dir=/s"), 0);
        config_apply_rust_log(&c, "debug");
        ck_assert_int_eq(c.log_level, LOG_DEBUG);
        config_apply_rust_log(&c, "ERROR");
        ck_assert_int_eq(c.log_level, LOG_ERR);
        config_apply_rust_log(&c, "info,virtiofsd=trace");
        ck_assert_int_eq(c.log_level, LOG_DEBUG); /* our target beats the bare level */
        config_apply_rust_log(&c, "other=debug,warn");
        ck_assert_int_eq(c.log_level, LOG_WARNING);
        config_apply_rust_log(&c, "nonsense");
        ck_assert_int_eq(c.log_level, LOG_WARNING); /* ignored, as env_logger ignores it */
        config_apply_rust_log(&c, "off");
        ck_assert_int_eq(c.log_level, -1);
        config_done(&c);

        /* a level on the command line wins */
        ck_assert_int_eq(PARSE(&c, "--shared-dir=/s", "--log-level=info"), 0);
        config_apply_rust_log(&c, "debug");
        ck_assert_int_eq(c.log_level, LOG_INFO);
        config_done(&c);
}
END_TEST

START_TEST(test_relative_paths) {
        char cwd[4096], want[4200];
        Config c;

        ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
        ck_assert_int_eq(PARSE(&c, "--shared-dir", ".", "--socket-path", "vhost.sock"), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_str_eq(c.shared_dir, cwd);
        snprintf(want, sizeof want, "%s/vhost.sock", cwd);
        ck_assert_str_eq(c.socket_path, want);
        ck_assert_str_eq(c.fs.shared_dir, cwd);
        config_done(&c);
        /* the key file: read before the sandbox, but named as every other path */
        ck_assert_int_eq(PARSE(&c, "--shared-dir", ".", "--privileged-files-key", "k"), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        snprintf(want, sizeof want, "%s/k", cwd);
        ck_assert_str_eq(c.privileged_key_file, want);
        config_done(&c);
}
END_TEST

START_TEST(test_resolve_threads) {
        ThreadMode m;
        unsigned n;
        const char *why;

        /* virtiofsd's meaning of the size alone */
        ck_assert_int_eq(config_resolve_threads(-1, -1, &m, &n, &why), 0);
        ck_assert_int_eq(m, THREAD_MODE_INLINE);
        ck_assert_uint_eq(n, executor_default_pool_size());
        ck_assert_int_eq(config_resolve_threads(-1, 0, &m, &n, &why), 0);
        ck_assert_int_eq(m, THREAD_MODE_INLINE);
        ck_assert_int_eq(config_resolve_threads(-1, 16, &m, &n, &why), 0);
        ck_assert_int_eq(m, THREAD_MODE_POOL);
        ck_assert_uint_eq(n, 16);
        /* --threads with and without a size */
        ck_assert_int_eq(config_resolve_threads(THREAD_MODE_AUTO, -1, &m, &n, &why), 0);
        ck_assert_int_eq(m, THREAD_MODE_AUTO);
        ck_assert_uint_ge(n, 4);
        ck_assert_uint_le(n, 64);
        ck_assert_int_eq(config_resolve_threads(THREAD_MODE_POOL, 1024, &m, &n, &why), 0);
        ck_assert_int_eq(m, THREAD_MODE_POOL);
        ck_assert_uint_eq(n, 1024);
        ck_assert_int_eq(config_resolve_threads(THREAD_MODE_INLINE, 8, &m, &n, &why), 0);
        ck_assert_int_eq(m, THREAD_MODE_INLINE);
        ck_assert_uint_eq(n, 8); /* kept for a later switch */
        ck_assert_int_eq(config_resolve_threads(THREAD_MODE_INLINE, 0, &m, &n, &why), 0);
        /* nonsense */
        ck_assert_int_eq(config_resolve_threads(THREAD_MODE_POOL, 0, &m, &n, &why), -EINVAL);
        ck_assert_ptr_nonnull(why);
        ck_assert_int_eq(config_resolve_threads(THREAD_MODE_AUTO, 0, &m, &n, &why), -EINVAL);
        ck_assert_int_eq(config_resolve_threads(_THREAD_MODE_MAX, -1, &m, &n, &why), -EINVAL);
        ck_assert_int_eq(config_resolve_threads(-1, 1025, &m, &n, &why), -ERANGE);
}
END_TEST

/* Reads a whole file (malloc'd) or fails the test. */
static char *slurp(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf;
        long n;

        ck_assert_msg(f != NULL, "cannot open %s", path);
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        buf = malloc((size_t)n + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(fread(buf, 1, (size_t)n, f), n);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* Whether text mentions --name as a whole option (not as the prefix of a longer one). */
static bool mentions(const char *text, const char *name) {
        char want[128];

        snprintf(want, sizeof want, "--%s", name);
        for (const char *p = strstr(text, want); p; p = strstr(p + 1, want)) {
                char next = p[strlen(want)];
                if (!(next == '-' || next == '_' || (next >= 'a' && next <= 'z')))
                        return true;
        }
        return false;
}

/* troff writes a dash as "\-": the man page's text with those read as plain dashes. */
static void troff_dashes(char *s) {
        char *w = s;
        for (const char *r = s; *r; r++) {
                if (r[0] == '\\' && r[1] == '-')
                        continue;
                *w++ = *r;
        }
        *w = '\0';
}

START_TEST(test_docs_list_every_option) {
        const char *src = getenv("VUFSD_SOURCE_ROOT");
        char path[4096], *help = NULL, *man, *doc;
        size_t help_len = 0;
        FILE *mem;
        int saved;

        ck_assert_msg(src != NULL, "VUFSD_SOURCE_ROOT not set");
        /* --help, captured */
        mem = open_memstream(&help, &help_len);
        ck_assert_ptr_nonnull(mem);
        fflush(stdout);
        saved = dup(STDOUT_FILENO);
        {
                char tmpl[] = "/tmp/vufsd-help.XXXXXX";
                int fd = mkstemp(tmpl);
                Config c;
                ck_assert_int_ge(fd, 0);
                unlink(tmpl);
                dup2(fd, STDOUT_FILENO);
                ck_assert_int_eq(PARSE(&c, "--help"), 1);
                config_done(&c);
                fflush(stdout);
                dup2(saved, STDOUT_FILENO);
                close(saved);
                lseek(fd, 0, SEEK_SET);
                for (char buf[4096];;) {
                        ssize_t n = read(fd, buf, sizeof buf);
                        if (n <= 0)
                                break;
                        fwrite(buf, 1, (size_t)n, mem);
                }
                close(fd);
        }
        fclose(mem);
        snprintf(path, sizeof path, "%s/docs/man/vufsd.8", src);
        man = slurp(path);
        troff_dashes(man);
        snprintf(path, sizeof path, "%s/docs/launchers.md", src);
        doc = slurp(path);

        for (size_t i = 0; config_option_name(i); i++) {
                const char *name = config_option_name(i);
                ck_assert_msg(mentions(help, name), "--help does not list --%s", name);
                ck_assert_msg(mentions(man, name), "docs/man/vufsd.8 does not document --%s", name);
                ck_assert_msg(mentions(doc, name), "docs/launchers.md does not mention --%s", name);
        }
        ck_assert_ptr_null(config_option_name(1000));
        free(help);
        free(man);
        free(doc);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("config");

        tcase_add_test(tc, test_rust_options_typed);
        tcase_add_test(tc, test_defaults);
        tcase_add_test(tc, test_file_handle_modes);
        tcase_add_test(tc, test_last_wins);
        tcase_add_test(tc, test_o_forms);
        tcase_add_test(tc, test_short_and_deprecated);
        tcase_add_test(tc, test_usage_errors);
        tcase_add_test(tc, test_verify_refusals);
        tcase_add_test(tc, test_overlapping_maps);
        tcase_add_test(tc, test_id_syntax);
        tcase_add_test(tc, test_translations);
        tcase_add_test(tc, test_rust_log);
        tcase_add_test(tc, test_relative_paths);
        tcase_add_test(tc, test_resolve_threads);
        tcase_add_test(tc, test_docs_list_every_option);
        suite_add_tcase(s, tc);
}

TEST_MAIN("config", add_tests)
