/* fuzz-state.c: the input is a session state stream (session-state.h). It is decoded as given
 * (nearly always refused by its checksum), then sealed (its checksum made right, so the checks
 * behind it are reached) and decoded again; a stream that is accepted is encoded again, and that
 * encoding must decode to the same counts: what the reader accepts, the writer can say.
 * The same bytes after the header are also a crash survival journal (session_state_from_journal(),
 * what a taken-over serving process may leave with the keeper): cut into entries by a length byte
 * each (its top bit: the entry has an fd), and held to the same rule. */
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

static void journal(const uint8_t *data, size_t size) {
        StateSession ss = { .proto_major = 7, .proto_minor = 38 };
        StateJournalEntry e[64];
        int32_t fd_entry[64];
        SessionState *s = NULL, *again = NULL;
        uint8_t *out = NULL;
        size_t n = 0, dropped = 0, out_len;
        char err[256];
        int slots;

        while (size > 0 && n < 64) {
                size_t len = MIN((size_t) (data[0] & 0x7f) * 4, size - 1);
                e[n] = (StateJournalEntry) { data + 1, len, data[0] & 0x80 ? 100 + (int) n : -1 };
                n++;
                data += 1 + len;
                size -= 1 + len;
        }
        slots = session_state_from_journal(&ss, e, n, 1000, &s, &dropped, fd_entry, err, sizeof err);
        if (slots < 0)
                return;
        for (int k = 0; k < slots; k++)
                if (fd_entry[k] < 0 || (size_t) fd_entry[k] >= n || e[fd_entry[k]].fd < 0)
                        abort(); /* a slot that names no fd */
        if (session_state_encode(s, &out, &out_len, err, sizeof err) != 0)
                abort();
        if (session_state_decode(out, out_len, STATE_MAX_BYTES, &again, err, sizeof err) != 0 ||
            session_state_node_count(again) != session_state_node_count(s))
                abort();
        session_state_free(again);
        session_state_free(s);
        free(out);
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
        if (size > STATE_HEADER_SIZE)
                journal(data + STATE_HEADER_SIZE, size - STATE_HEADER_SIZE);
        return 0;
}
