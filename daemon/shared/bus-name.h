/* bus-name.h: names on the bus shared by the daemon and fsctl: well-known names, path, errors. */
#pragma once

#define BUS_NAME_PREFIX "org.vufsd.Instance."
#define BUS_OBJECT_PATH "/org/vufsd/Daemon"
#define BUS_INTERFACE "org.vufsd.Daemon1"
#define BUS_ERROR_INVALID_MODE "org.vufsd.Error.InvalidMode"
#define BUS_ERROR_OUT_OF_RANGE "org.vufsd.Error.OutOfRange"
#define BUS_ERROR_INVALID_CACHE_POLICY "org.vufsd.Error.InvalidCachePolicy"
#define BUS_ERROR_FAILED "org.vufsd.Error.Failed"
#define BUS_ERROR_NOT_SUPPORTED "org.vufsd.Error.NotSupported"

/* Group whose members may change a running instance, besides root (see policy/). */
#define BUS_ADMIN_GROUP "vufsd"

/* The unprivileged identity vufsd, run as root, connects to the system bus with (--bus-user): the
 * policy lets only this user own org.vufsd.Instance.* names, and fsctl trusts a system-bus name
 * only when this user or root owns it. Not "vufsd": systemd-sysusers would make the admin group
 * "vufsd" its primary group. */
#define BUS_DAEMON_USER "vufsd-bus"

/* Longest instance name accepted, in bytes (its escaped form always fits a bus name). */
#define BUS_INSTANCE_MAX 64

/* Instance name <-> the last element of its bus name: every byte outside [A-Za-z0-9] (so '_'
 * too) becomes _xx (two lower-case hex digits), and so does a leading digit. Injective and
 * reversible. -EINVAL for an empty or too long name, or an element that is not such an escape. */
int bus_instance_escape(const char *instance, char **ret);
int bus_instance_unescape(const char *element, char **ret);

/* The well-known name of an instance: BUS_NAME_PREFIX + escaped name. */
int bus_instance_to_name(const char *instance, char **ret);
