/* request-progress.c: the thread's current request progress hook (request-progress.h). */
#include "request-progress.h"

_Thread_local RequestProgress *request_progress;
