/* inflight.h: one ring's in-flight table, in a memfd a process outside the serving one keeps
 * (docs/survival.md): which descriptor heads were popped and not yet handed back, in which order,
 * and for those whose reply is written, its length and used slot. A serving process that dies at
 * any instruction leaves a table from which the next one resumes the ring: requests popped and not
 * answered run again, replies written and not yet published are published without running their
 * request again, published ones are forgotten.
 *
 * The same idea as the vhost-user spec's in-flight I/O tracking (a descriptor-indexed table with a
 * counter for order), kept by vufsd itself: QEMU's vhost-user-fs never asks for it. Written only
 * under the queue's lock, by whoever holds the VirtQueue; a crash is the only reader's moment, so
 * the stores need program order (compiler fences), not CPU fences: a killed process's completed
 * stores are in the shared pages. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INFLIGHT_MAGIC 0x76756669u /* "vufi" */

enum {
        INFLIGHT_FREE = 0,
        INFLIGHT_POPPED = 1, /* taken from the avail ring, reply not written */
        INFLIGHT_PUSHED = 2, /* reply written, used entry at used_slot maybe not published */
        INFLIGHT_REPLIED = 3, /* reply written into the chain (len), used entry not yet */
        INFLIGHT_HOST_DONE = 4, /* its host call returned result, reply not written: answered from
                                 * result, never run again */
        INFLIGHT_STARTED = 5, /* its host call was about to be made; result: whether the name it
                               * acts on existed then */
};

typedef struct InflightDesc {
        uint8_t state;
        uint8_t pad;
        uint16_t avail_slot; /* the avail index it was popped from */
        uint16_t used_slot;  /* the used index it was pushed at (PUSHED) */
        uint16_t pad2;
        uint32_t len;        /* its reply's length (PUSHED) */
        uint32_t pad3;
        uint64_t counter;    /* pop order */
        int64_t result;      /* the host call's (HOST_DONE) */
        uint64_t pad4;
} InflightDesc;

typedef struct InflightHeader {
        uint32_t magic;
        uint32_t num;        /* ring size the table is for */
        uint16_t last_avail; /* next avail entry to pop: every entry before it is in the table or done */
        uint16_t published;  /* the used index last published */
        uint32_t pad;
        uint64_t counter;
        InflightDesc desc[];
} InflightHeader;

typedef struct Inflight {
        InflightHeader *h;
        size_t size;
        int fd; /* the memfd */
        /* Heads pushed since the last publication (this process's own, not shared). */
        uint16_t *pushed;
        unsigned n_pushed;
} Inflight;

/* Bytes of a table for a ring of num entries. */
size_t inflight_size(unsigned num);

/* A new, empty table for a ring of num entries in a new memfd (fd kept in *ret). */
int inflight_new(Inflight *ret, unsigned num);
/* Maps a table another process wrote (fd taken): -EBADMSG when it is not one for a ring of num. */
int inflight_adopt(Inflight *ret, int fd, unsigned num);
void inflight_done(Inflight *t);

/* The ring's life, each called where virtqueue.c does the same to the ring. */
void inflight_popped(Inflight *t, uint16_t head, uint16_t avail_slot);
/* The request's host call returned result (request-progress.h); same rules as inflight_replied(). */
void inflight_host_done(Inflight *t, uint16_t head, int64_t result);
/* Its host call is about to be made; existed: see request-progress.h. */
void inflight_started(Inflight *t, uint16_t head, bool existed);
/* The request's reply is in guest memory (len bytes): from here on it is never run again. Called
 * by the thread that ran it, without the queue lock (it writes only this head's entry). */
void inflight_replied(Inflight *t, uint16_t head, uint32_t len);
void inflight_pushed(Inflight *t, uint16_t head, uint16_t used_slot, uint32_t len);
/* Everything pushed since the last call is published: freed. */
void inflight_published(Inflight *t);
void inflight_set_last_avail(Inflight *t, uint16_t last_avail);

/* What a resuming process does with a table: the heads to run again, in pop order, and those whose
 * reply is written and whose used entry is to be written again, in used order. Entries already
 * published (used index in the ring past their slot) and those popped after the recorded
 * last_avail (they are popped again) are freed. Those whose host call is done are in rerun too, in
 * their order: the caller looks at their state (INFLIGHT_HOST_DONE) and answers them from result.
 * Returns the counts. */
typedef struct InflightResume {
        uint16_t last_avail;
        unsigned n_rerun, n_repush;
        uint16_t *rerun;  /* heads, pop order */
        uint16_t *repush; /* heads, used-slot order; their len in the table */
} InflightResume;

int inflight_resume(Inflight *t, uint16_t ring_used_idx, InflightResume *ret);
void inflight_resume_done(InflightResume *r);
