/* directories.c: open directories (OPENDIR, READDIR and READDIRPLUS, RELEASEDIR, FSYNCDIR). */
#include "directories.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "dir-stream.h"
#include "file-io.h"
#include "handle-map.h"
#include "inode-fd.h"
#include "lookup.h"
#include "passthrough-internal.h"
#include "util.h"

int pt_opendir(void *fs, const FsCtx *c, uint64_t nodeid, int flags, uint64_t *ret_fh) {
        Passthrough *p = fs;
        _cleanup_(inode_unrefp) Inode *i = NULL;
        int fd, r;

        r = get_dir(p, nodeid, &i);
        if (r < 0)
                return r;
        fd = open_inode_for(p, i, O_RDONLY | O_DIRECTORY, c, R_OK); /* as OPEN: the caller's groups */
        if (fd < 0)
                return fd;
        return handle_map_add(p->handles, i, fd, O_RDONLY | O_DIRECTORY, true, ret_fh);
}

int pt_readdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const FsDirFiller *fill) {
        Passthrough *p = fs;
        _cleanup_(handle_unrefp) Handle *h = NULL;
        _cleanup_(inode_fd_done) InodeFd base = INODE_FD_NULL;
        bool plus = fill->plus;
        unsigned added = 0;
        int r;

        r = handle_map_get(p->handles, fh, nodeid, 1, &h);
        if (r < 0)
                return r;
        /* READDIRPLUS looks the names up through the directory's node, not through the stream's
         * fd: a stream kept across a death (docs/survival.md) lies on the dead process's copy of
         * the share's mount, and its names there would carry that mount's id, which is no node
         * this process has (a second node for a known file) and another mount than the directory's
         * (a submount to the guest, whose rmdir then answers EBUSY). Where the node has no fd
         * now (a directory removed since, its fd evicted), the stream's own fd still lists it. */
        if (plus && inode_fd(p, h->inode, &base, NULL) < 0)
                base.fd = h->fd;

        /* The position and the buffered entries belong to the handle: one reader at a time. */
        pthread_mutex_lock(&h->dir_lock);
        r = dir_stream_seek(&h->stream, h->fd, off);
        while (r >= 0) {
                const struct linux_dirent64 *d;
                FsEntry e = { 0 }, *ep = NULL;
                size_t namelen;

                r = dir_stream_peek(&h->stream, h->fd, &d);
                if (r <= 0)
                        break;
                namelen = strlen(d->d_name);
                if (!fs_dir_fits(fill, namelen))
                        break; /* stays buffered for the request that continues here */
                if (plus) {
                        ep = &e;
                        e.st.st_ino = d->d_ino;
                        e.st.st_mode = (mode_t) DTTOIF(d->d_type);
                        /* "." and ".." carry no node (the guest would not count them). */
                        if (!fs_name_is_dot_or_dotdot(d->d_name)) {
                                r = lookup_child(p, h->inode, base.fd, d->d_name, &e);
                                if (r == -ENOENT) {
                                        dir_stream_consume(&h->stream); /* removed since getdents */
                                        r = 0;
                                        continue;
                                }
                                if (r < 0)
                                        /* Still list the name, without attributes. */
                                        e = (FsEntry) { .st.st_ino = d->d_ino, .st.st_mode = (mode_t) DTTOIF(d->d_type) };
                        }
                }
                /* With attributes the type is theirs: a device node the guest made (map mode) is a
                 * regular file to the host's getdents. Plain READDIR keeps the host's d_type. */
                r = fs_dir_add(fill, d->d_name, namelen, d->d_ino,
                               ep && ep->nodeid != 0 ? IFTODT(ep->st.st_mode) : d->d_type, (uint64_t) d->d_off, ep);
                if (r < 0 && ep && ep->nodeid != 0)
                        inode_map_forget(p->inodes, ep->nodeid, 1);
                if (r == -ENOSPC) {
                        r = 0;
                        break;
                }
                /* Sent, or a name FUSE cannot carry (skipped rather than ending the listing here). */
                dir_stream_consume(&h->stream);
                added += r >= 0;
                r = 0;
        }
        dir_stream_end(&h->stream); /* the read-ahead may now go to another handle (dir-stream.h) */
        pthread_mutex_unlock(&h->dir_lock);
        /* An error after some entries were added still delivers those entries. */
        return added > 0 ? 0 : MIN(r, 0);
}

int pt_releasedir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh) {
        Passthrough *p = fs;
        return handle_map_remove(p->handles, fh, nodeid, 1);
}

int pt_fsyncdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, bool datasync) {
        return fsync_handle(fs, nodeid, fh, 1, datasync);
}
