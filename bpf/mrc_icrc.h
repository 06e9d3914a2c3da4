/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * Checksums for the frames mrc_xdp.bpf.c answers with XDP_TX: the IPv4
 * header checksum and the MRC ICRC (CRC-32/IEEE over the invariant fields,
 * see include/mrc/uapi/wire.h and user/codec/icrc.cc).
 *
 * BPF has no CRC helper, so the ICRC is a slicing-by-4 table walk over the
 * packet, four bytes per iteration, in a loop bounded by MRC_ICRC_MAX_WORDS.
 * The caller writes the variant fields as all ones first (exactly what the
 * ICRC definition covers), runs mrc_icrc(), then writes their real values.
 */
#ifndef MRC_BPF_ICRC_H
#define MRC_BPF_ICRC_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "mrc_crc32_table.h"

/* Longest covered region: IPv6 40 + UDP 8 + BTH 12 + EETH 36 = 96 bytes. */
#define MRC_ICRC_MAX_WORDS 32

/*
 * ICRC of the len bytes at data + off (len a multiple of 4), seeded with the
 * 8 bytes of ones. Returns 0 and the CRC in *out, or -1 if the region is not
 * inside the packet.
 */
static __always_inline int mrc_icrc(void *data, void *data_end, __u32 off, __u32 len, __u32 *out)
{
	__u32 crc = MRC_ICRC_SEED;
	__u32 words = len / 4;
	__u32 i;

	barrier_var(off);
	off &= 0x1f; /* the IP header starts at 14 or 18 */
#pragma clang loop unroll(disable)
	for (i = 0; i < MRC_ICRC_MAX_WORDS; i++) {
		__u32 o = off + i * 4;
		__u32 *w;

		if (i >= words)
			break;
		barrier_var(o); /* keep a scalar offset: no pointer induction variable */
		w = data + o;
		if ((void *)(w + 1) > data_end)
			return -1;
		crc ^= *w; /* little-endian load: byte 0 in the low bits */
		crc = mrc_crc32_tbl[3][crc & 0xff] ^ mrc_crc32_tbl[2][(crc >> 8) & 0xff] ^
		      mrc_crc32_tbl[1][(crc >> 16) & 0xff] ^ mrc_crc32_tbl[0][crc >> 24];
	}
	if (i < words)
		return -1;
	*out = ~crc;
	return 0;
}

/* One's complement sum of a 20-byte IPv4 header, folded to 16 bits. */
static __always_inline __u16 mrc_ip4_fold(const __u16 *w)
{
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

#endif /* MRC_BPF_ICRC_H */
