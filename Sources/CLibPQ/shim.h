#ifndef SUBSYNC_CLIBPQ_SHIM_H
#define SUBSYNC_CLIBPQ_SHIM_H

#include <libpq-fe.h>

#endif
