/* fuzz-common.h: what the libFuzzer targets share: a temporary shared directory, quiet logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A program the fuzzer wrote, read a byte at a time; past its end every byte reads as 0. */
typedef struct Input {
        const uint8_t *p;
        size_t left;
} Input;

static inline uint8_t next(Input *in) {
        if (in->left == 0)
                return 0;
        in->left--;
        return *in->p++;
}

/* Creates (once per process) a shared directory with a few entries of every type and returns its
 * path. */
const char *fuzz_shared_dir(void);

/* As root, chroot() into the shared directory's parent once the server is set up (it has opened the
 * share and /proc/self/fd by then), so a path escape the fuzzer finds in the filesystem layer cannot
 * touch the host. Call it from the first input, not from LLVMFuzzerInitialize(): libFuzzer has
 * read the seed corpora by then, and the working directory (output corpus and crash artifacts,
 * given as relative paths) stays reachable. VUFSD_FUZZ_NO_CHROOT=1 turns it off (symbolized stacks
 * when reproducing a crash). */
void fuzz_confine(void);

/* Guest-triggered warnings would flood the output: only errors are printed. */
void fuzz_quiet_logging(void);

/* Removes everything in the shared directory and puts the initial entries back (inputs create
 * files; a long run must not fill the disk or make directories huge). */
void fuzz_reset_shared_dir(void);
