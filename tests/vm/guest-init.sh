#!/bin/busybox sh
# /init of the real-guest initramfs: load the virtiofs modules, mount the share, run one guest script,
# print one "VUFS-RESULT: PASS" or "VUFS-RESULT: FAIL <reason>" line, unmount and power off (or reboot).
#
# Kernel command line parameters (all optional):
#   vufs.tag=TAG        virtiofs tag to mount (default vufs)
#   vufs.script=NAME    script in /scripts to run as `sh /scripts/NAME MOUNTPOINT` (default guest-basic.sh)
#   vufs.mnt=DIR        mount point (default /mnt)
#   vufs.opts=OPTS      extra mount options
#   vufs.KEY=VALUE      any other one is exported to the script as VUFS_KEY=VALUE (KEY upper-cased)
# A passing script may write "reboot" to /run/vufs-action to reboot instead of powering off.

/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run

uptime_s() {
        cut -d' ' -f1 /proc/uptime
}

finish() {
        echo "VUFS-RESULT: $*"
        sync
        if [ "$1" = PASS ] && [ "$(cat /run/vufs-action 2>/dev/null)" = reboot ]; then
                echo "VUFS-ACTION: reboot"
                reboot -f
        else
                echo "VUFS-ACTION: poweroff"
                poweroff -f
        fi
        sleep 10
        echo "VUFS-RESULT: FAIL power off did not happen"
        exit 1
}

tag=vufs
script=guest-basic.sh
mnt=/mnt
opts=
for arg in $(cat /proc/cmdline); do
        case "$arg" in
        vufs.tag=*) tag=${arg#vufs.tag=} ;;
        vufs.script=*) script=${arg#vufs.script=} ;;
        vufs.mnt=*) mnt=${arg#vufs.mnt=} ;;
        vufs.opts=*) opts=${arg#vufs.opts=} ;;
        vufs.*=*)
                key=${arg%%=*}
                key=$(echo "${key#vufs.}" | tr 'a-z.-' 'A-Z__')
                export "VUFS_$key=${arg#*=}"
                ;;
        esac
done
VUFS_MODDIR=/lib/modules/$(cat /etc/vufs/kernel-version)
export VUFS_TAG="$tag" VUFS_MNT="$mnt" VUFS_MODDIR

echo "VUFS-BOOT: kernel $(uname -r) up $(uptime_s)s script $script tag $tag"

while read -r m; do
        insmod "$VUFS_MODDIR/$m" || finish "FAIL insmod $m"
done < /etc/vufs/modules

[ -f "/scripts/$script" ] || finish "FAIL no guest script /scripts/$script"

mkdir -p "$mnt"
tries=0
until mount -t virtiofs ${opts:+-o "$opts"} "$tag" "$mnt"; do
        tries=$((tries + 1))
        [ $tries -lt 50 ] || finish "FAIL mount -t virtiofs $tag $mnt"
        usleep 100000
done
echo "VUFS-MOUNTED: $tag on $mnt up $(uptime_s)s"

sh "/scripts/$script" "$mnt"
rc=$?
sync
if grep -q " $mnt virtiofs " /proc/mounts; then
        umount "$mnt" || finish "FAIL umount $mnt"
fi
echo "VUFS-DONE: script exit $rc up $(uptime_s)s"
if [ $rc -eq 0 ]; then
        finish PASS
else
        finish "FAIL $script exited with $rc"
fi
