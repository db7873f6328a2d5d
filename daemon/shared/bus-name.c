/* bus-name.c: escaping instance names into well-known bus names and back. */
#include "bus-name.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

int bus_instance_escape(const char *instance, char **ret) {
        static const char hex[] = "0123456789abcdef";
        size_t n = instance ? strlen(instance) : 0;
        char *e, *p;

        if (n == 0 || n > BUS_INSTANCE_MAX)
                return -EINVAL;
        e = p = malloc(n * 3 + 1);
        if (!e)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) instance[i];
                /* A bus name element must not start with a digit, and '_' is the escape itself. */
                if (is_alnum((char) c) && !(i == 0 && c >= '0' && c <= '9'))
                        *p++ = (char) c;
                else {
                        *p++ = '_';
                        *p++ = hex[c >> 4];
                        *p++ = hex[c & 15];
                }
        }
        *p = '\0';
        *ret = e;
        return 0;
}

int bus_instance_unescape(const char *element, char **ret) {
        _cleanup_free_ char *s = NULL;
        size_t n = element ? strlen(element) : 0, k = 0;

        if (n == 0)
                return -EINVAL;
        s = malloc(n + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                char c = element[i];

                if (c != '_') {
                        if (!is_alnum(c) || (i == 0 && c >= '0' && c <= '9'))
                                return -EINVAL;
                        s[k++] = c;
                        continue;
                }
                if (n - i < 3)
                        return -EINVAL;
                int hi = unhex(element[i + 1]), lo = unhex(element[i + 2]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                c = (char) (hi << 4 | lo);
                /* Only the escapes bus_instance_escape() produces: one spelling per name. */
                if (c == '\0' || (is_alnum(c) && !(k == 0 && c >= '0' && c <= '9')))
                        return -EINVAL;
                s[k++] = c;
                i += 2;
        }
        s[k] = '\0';
        if (k > BUS_INSTANCE_MAX)
                return -EINVAL;
        *ret = TAKE_PTR(s);
        return 0;
}

int bus_instance_to_name(const char *instance, char **ret) {
        _cleanup_free_ char *e = NULL;
        int r;

        r = bus_instance_escape(instance, &e);
        if (r < 0)
                return r;
        if (asprintf(ret, "%s%s", BUS_NAME_PREFIX, e) < 0)
                return -ENOMEM;
        return 0;
}
