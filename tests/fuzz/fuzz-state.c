/* fuzz-state.c: the input is a session state stream (session-state.h). It is decoded as given
 * (nearly always refused by its checksum), then sealed (its checksum made right, so the checks
 * behind it are reached) and decoded again; a stream that is accepted is encoded again, and that
 * encoding must decode to the same counts: what the reader accepts, the writer can say. */
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "session-state.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void) argc;
        (void) argv;
        fuzz_quiet_logging();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        SessionState *s = NULL, *again = NULL;
        uint8_t *copy, *out = NULL;
        char err[256];
        size_t out_len;

        if (session_state_decode(data, size, STATE_MAX_BYTES, &s, err, sizeof err) == 0)
                session_state_free(s);
        s = NULL;
        copy = malloc(size ? size : 1);
        if (!copy)
                abort();
        memcpy(copy, data, size);
        session_state_seal(copy, size);
        if (session_state_decode(copy, size, 1 << 20, &s, err, sizeof err) == 0) {
                if (session_state_encode(s, &out, &out_len, err, sizeof err) != 0)
                        abort(); /* accepted but not writable */
                if (session_state_decode(out, out_len, STATE_MAX_BYTES, &again, err, sizeof err) != 0 ||
                    session_state_node_count(again) != session_state_node_count(s) ||
                    session_state_handle_count(again) != session_state_handle_count(s) ||
                    session_state_lock_count(again) != session_state_lock_count(s))
                        abort();
                session_state_free(again);
                free(out);
                session_state_free(s);
        }
        free(copy);
        return 0;
}
