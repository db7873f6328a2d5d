/* fs-names.c: validation of guest-supplied names, symlink targets and xattr names. */
#include "fs-names.h"

#include <errno.h>
#include <limits.h>
#include <linux/limits.h>
#include <string.h>

int fs_string_take(const char **p, size_t *left, const char **ret, size_t *ret_len) {
        const char *nul = memchr(*p, 0, *left);
        size_t len;

        if (!nul)
                return -EINVAL;
        len = (size_t) (nul - *p);
        *ret = *p;
        if (ret_len)
                *ret_len = len;
        *p += len + 1;
        *left -= len + 1;
        return 0;
}

int fs_name_validate(const char *name, size_t len, bool allow_dots) {
        if (len == 0)
                return -ENOENT;
        if (len > NAME_MAX)
                return -ENAMETOOLONG;
        if (memchr(name, '/', len))
                return -EINVAL;
        if (!allow_dots && fs_name_is_dot_or_dotdot(name))
                return -EINVAL;
        return 0;
}

int fs_symlink_target_validate(const char *target, size_t len) {
        if (len == 0)
                return -ENOENT;
        if (len >= PATH_MAX)
                return -ENAMETOOLONG;
        return 0;
}

int fs_xattr_name_validate(const char *name, size_t len) {
        if (len == 0 || len > XATTR_NAME_MAX)
                return -ERANGE;
        return 0;
}
