/* Opens an mrc device through the C API and reports the mode it got
 * (mrc_device_mode) or why the open failed, for svc_mode_test.sh:
 *   svc_mode_helper [-x] IF[,IF...]   (-x: MRC_DEVICE_EXCLUSIVE)
 * Prints "mode service|exclusive: WHY" and exits 0, or
 * "open failed errno NAME: MESSAGE" and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mrc/mrc.h"

static const char *ename(int e)
{
	switch (e) {
	case EBUSY:
		return "EBUSY";
	case ENOENT:
		return "ENOENT";
	case EINVAL:
		return "EINVAL";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	default:
		return "other";
	}
}

int main(int argc, char **argv)
{
	struct mrc_device_opts o;
	const char *ifs[16];
	char list[512], why[256];
	int n = 0, a = 1, m;
	struct mrc_device *d;

	memset(&o, 0, sizeof(o));
	/* Exclusive mode must not use an mrcd of the machine (its pinned maps
	 * are global); service mode ignores the flag. */
	o.flags = MRC_DEVICE_NO_MRCD;
	if (argc > 1 && !strcmp(argv[1], "-x")) {
		o.flags |= MRC_DEVICE_EXCLUSIVE;
		a++;
	}
	if (a >= argc) {
		fprintf(stderr, "usage: svc_mode_helper [-x] IF[,IF...]\n");
		return 2;
	}
	snprintf(list, sizeof(list), "%s", argv[a]);
	for (char *s = strtok(list, ","); s && n < 16; s = strtok(NULL, ","))
		ifs[n++] = s;
	d = mrc_open_device(ifs, n, &o);
	if (!d) {
		int e = errno;
		printf("open failed errno %s: %s\n", ename(e), mrc_last_error());
		return 1;
	}
	m = mrc_device_mode(d, why, sizeof(why));
	printf("mode %s: %s\n", m == MRC_DEVICE_MODE_SERVICE ? "service" : "exclusive", why);
	mrc_close_device(d);
	return 0;
}
