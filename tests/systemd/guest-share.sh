# Helpers for the systemd and libvirt tests (sourced after tests/vm/common.sh): the share contents
# tests/vm/guest-basic.sh expects, and the host-side checks of what the guest left there.

# guest_share_prepare SHARE SUMS: host-data/ (files + SHA256SUMS), host-dir/ (300 entries),
# host-links/, test.conf; SUMS gets the host files' checksums for guest_share_check.
guest_share_prepare() {
        local share=$1 sums=$2 i
        mkdir -p "$share/host-dir" "$share/host-links"
        vm_make_data "$share/host-data" big1.bin:5242880 odd.bin:3149825 small.bin:100 empty.bin:0
        for i in $(seq 0 299); do
                echo "$i" > "$share/host-dir/e$i"
        done
        echo "target of the host's links" > "$share/host-links/target.txt"
        ln "$share/host-links/target.txt" "$share/host-links/hard"
        ln -s target.txt "$share/host-links/sym"
        printf 'HOST_DATA_FILES=4\nHOST_DIR_ENTRIES=300\n' > "$share/test.conf"
        (cd "$share/host-data" && sha256sum -- *.bin) > "$sums"
}

# guest_share_check SHARE SUMS: the guest's files match the guest's checksums, its 250-entry
# directory is there, the host's files are unchanged. Prints what is wrong; non-zero on failure.
guest_share_check() {
        local share=$1 sums=$2 n
        (cd "$share/guest-data" && sha256sum --quiet -c SHA256SUMS) || { echo "guest-data checksums differ"; return 1; }
        (cd "$share/host-data" && sha256sum --quiet -c "$sums") || { echo "host-data changed"; return 1; }
        n=$(ls "$share/guest-dir" | wc -l)
        [ "$n" = 250 ] || { echo "guest-dir has $n entries, want 250"; return 1; }
}
