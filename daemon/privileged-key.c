/* privileged-key.c: the key --privileged-files=map authenticates its metadata with, kept outside the share. */
#include "privileged-key.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define KEY_NAME "privileged-files.key"

int privileged_key_default_path(char **ret) {
        const char *state = getenv("STATE_DIRECTORY"), *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
        char *p = NULL;
        int n;

        if (state && state[0] == '/')
                /* StateDirectory= may name several, separated by ':': the first is the unit's own. */
                n = asprintf(&p, "%.*s/" KEY_NAME, (int) strcspn(state, ":"), state);
        else if (geteuid() == 0)
                n = asprintf(&p, "/var/lib/vufsd/" KEY_NAME);
        else if (xdg && xdg[0] == '/')
                n = asprintf(&p, "%s/vufsd/" KEY_NAME, xdg);
        else if (home && home[0] == '/')
                n = asprintf(&p, "%s/.local/state/vufsd/" KEY_NAME, home);
        else
                return -ENOENT;
        if (n < 0)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* mkdir -p of path's directory, each directory made 0700 (a key's directory is nobody else's). */
static int make_parents(const char *path) {
        _cleanup_free_ char *d = strdup(path);
        char *s;

        if (!d)
                return -ENOMEM;
        for (s = strchr(d + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = 0;
                if (mkdir(d, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                *s = '/';
        }
        return 0;
}

/* A new key: written to a temporary file, then linked to path, so a second vufsd starting at the
 * same moment never reads half a key (its link fails with EEXIST and it reads ours). */
static int make_key(const char *path) {
        _cleanup_free_ char *tmp = NULL;
        uint8_t key[FS_PRIVILEGED_KEY_SIZE];
        _cleanup_close_ int fd = -1;
        int r;

        r = make_parents(path);
        if (r < 0)
                return r;
        if (asprintf(&tmp, "%s.%d.tmp", path, (int) getpid()) < 0)
                return -ENOMEM;
        if (getrandom(key, sizeof key, 0) != (ssize_t) sizeof key)
                return -EIO;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        r = write(fd, key, sizeof key) == (ssize_t) sizeof key && fsync(fd) >= 0 ? 0 : -EIO;
        explicit_bzero(key, sizeof key);
        if (r >= 0 && link(tmp, path) < 0 && errno != EEXIST)
                r = negative_errno();
        (void) unlink(tmp);
        return r;
}

int privileged_key_load(const char *path, uint8_t key[static FS_PRIVILEGED_KEY_SIZE]) {
        _cleanup_close_ int fd = -1;
        struct stat st;
        ssize_t n;
        int r;

        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                r = make_key(path);
                if (r < 0)
                        return r;
                fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size != FS_PRIVILEGED_KEY_SIZE)
                return -EINVAL;
        if (st.st_uid != geteuid() || (st.st_mode & 077))
                return -EPERM;
        n = read(fd, key, FS_PRIVILEGED_KEY_SIZE);
        if (n < 0)
                return negative_errno();
        return n == FS_PRIVILEGED_KEY_SIZE ? 0 : -EINVAL;
}
