/* test-hooks.c: linked into vufsd-test-hooks only (never installed, never in vufsd): kills the
 * serving process at one point of one request's life, so test-frontend-survive can check what the
 * guest sees after each. VUFSD_TEST_KILL=STEP:OPCODE, STEP one of popped, host, replied, pushed,
 * published (device.h's DeviceStep); the first request with that FUSE opcode in the first serving
 * process is the one. */
#include <linux/fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "device.h"
#include "sandbox.h"
#include "survive.h"

static int kill_step = -1;
static uint32_t kill_opcode;

static void step_hook(DeviceStep step, const void *header) {
        struct fuse_in_header h;

        if ((int) step != kill_step || sandbox_generation() != 0)
                return;
        memcpy(&h, header, sizeof h);
        if (h.opcode == kill_opcode)
                raise(SIGKILL);
}

void survive_test_hooks_install(Device *d) {
        static const char *const steps[_DEVICE_STEP_MAX] = {
                [DEVICE_STEP_POPPED] = "popped",
                [DEVICE_STEP_HOST_DONE] = "host",
                [DEVICE_STEP_REPLIED] = "replied",
                [DEVICE_STEP_PUSHED] = "pushed",
                [DEVICE_STEP_PUBLISHED] = "published",
        };
        const char *e = getenv("VUFSD_TEST_KILL");
        char step[16];
        unsigned op;

        if (!e || sscanf(e, "%15[a-z]:%u", step, &op) != 2)
                return;
        for (int i = 0; i < _DEVICE_STEP_MAX; i++)
                if (strcmp(step, steps[i]) == 0)
                        kill_step = i;
        kill_opcode = op;
        if (kill_step >= 0)
                device_set_step_hook(d, step_hook);
}

/* Another version than vufsd's: the live-upgrade test (test-frontend-upgrade) alternates the two
 * builds and sees each upgrade in the Version property. */
const char *vufsd_version(void) {
        return PACKAGE_VERSION "+test-hooks";
}
