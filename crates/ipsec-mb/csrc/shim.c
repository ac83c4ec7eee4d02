/*
 * The few entry points vecgate uses from Intel's multi-buffer crypto
 * library (intel-ipsec-mb), as plain functions over plain arrays: the
 * library's own API goes through function pointers inside IMB_MGR and
 * through IMB_JOB, whose layouts this file takes from the installed
 * header instead of Rust restating them.
 *
 * A `vg_mb` is two managers, one per thread: one for AES-CBC (the widest
 * vector ISA), one for HMAC (the SSE manager where the CPU has SHA-NI: its
 * multi-buffer SHA-1/SHA-256 use those instructions, the AVX2 manager's do
 * not).
 */
#define NO_COMPAT_IMB_API_053
#include <intel-ipsec-mb.h>
#include <stdint.h>
#include <string.h>

/* Jobs per burst call; the Rust side never passes more. */
#define VG_MAX_BURST 64

enum vg_arch { VG_SSE = 1, VG_AVX = 2, VG_AVX2 = 3, VG_AVX512 = 4 };

struct vg_mb {
        IMB_MGR *cipher;
        IMB_MGR *hash;
};

struct vg_cbc {
        uint8_t *data;
        uint64_t len;
        const uint8_t *iv;
};

struct vg_mac {
        const uint8_t *msg;
        uint64_t len;
        uint8_t *tag;
};

uint64_t vg_cpu_features(void)
{
        return imb_get_feature_flags();
}

const char *vg_version(void)
{
        return imb_get_version_str();
}

static IMB_MGR *mgr_new(int arch)
{
        IMB_MGR *m = alloc_mb_mgr(0);

        if (m == NULL)
                return NULL;
        switch (arch) {
        case VG_SSE:
                init_mb_mgr_sse(m);
                break;
        case VG_AVX:
                init_mb_mgr_avx(m);
                break;
        case VG_AVX2:
                init_mb_mgr_avx2(m);
                break;
        case VG_AVX512:
                init_mb_mgr_avx512(m);
                break;
        default:
                free_mb_mgr(m);
                return NULL;
        }
        /* An init the CPU cannot run reports it here (missing flags). */
        if (imb_get_errno(m) != 0) {
                free_mb_mgr(m);
                return NULL;
        }
        return m;
}

void vg_mb_free(struct vg_mb *mb)
{
        if (mb == NULL)
                return;
        if (mb->cipher != NULL)
                free_mb_mgr(mb->cipher);
        if (mb->hash != NULL)
                free_mb_mgr(mb->hash);
        memset(mb, 0, sizeof(*mb));
}

/* 0 on success; `out` holds both managers or none. */
int vg_mb_init(struct vg_mb *out, int cipher_arch, int hash_arch)
{
        out->cipher = mgr_new(cipher_arch);
        out->hash = mgr_new(hash_arch);
        if (out->cipher == NULL || out->hash == NULL) {
                vg_mb_free(out);
                return -1;
        }
        return 0;
}

/* Expanded AES encryption and decryption keys (16-byte aligned, 240 bytes
 * each) of a 16- or 32-byte key; the SSE key schedule needs only AES-NI. */
int vg_aes_keyexp(const uint8_t *key, unsigned key_len, void *enc, void *dec)
{
        if (key_len == 16)
                aes_keyexp_128_sse(key, enc, dec);
        else if (key_len == 32)
                aes_keyexp_256_sse(key, enc, dec);
        else
                return -1;
        return 0;
}

/* HMAC's inner and outer initial states (RFC 2104 §2): the compression
 * function over key ^ ipad and key ^ opad, as IMB_JOB takes them. Keys
 * longer than a block are refused (ESP's are 20 and 32 bytes). */
int vg_hmac_pads(int sha256, const uint8_t *key, unsigned key_len,
                 uint8_t *ipad_state, uint8_t *opad_state)
{
        uint8_t block[64];
        unsigned i;

        if (key_len > sizeof(block))
                return -1;
        memset(block, 0x36, sizeof(block));
        for (i = 0; i < key_len; i++)
                block[i] ^= key[i];
        if (sha256)
                sha256_one_block_sse(block, ipad_state);
        else
                sha1_one_block_sse(block, ipad_state);
        memset(block, 0x5c, sizeof(block));
        for (i = 0; i < key_len; i++)
                block[i] ^= key[i];
        if (sha256)
                sha256_one_block_sse(block, opad_state);
        else
                sha1_one_block_sse(block, opad_state);
        imb_clear_mem(block, sizeof(block));
        return 0;
}

/* AES-CBC in place over n buffers (lengths multiples of 16), interleaved
 * across buffers, on the cipher manager or, with `on_hash_mgr`, on the
 * hash one (the SSE manager's 4 lanes beat the AVX2 manager's 8 when
 * fewer than 8 buffers fill them). Returns n, or a negative library error
 * number. */
int vg_mb_cbc(struct vg_mb *mb, int on_hash_mgr, const void *enc_keys,
              const void *dec_keys, unsigned key_len, int decrypt,
              const struct vg_cbc *ops, unsigned n)
{
        IMB_MGR *m = on_hash_mgr ? mb->hash : mb->cipher;
        IMB_JOB jobs[VG_MAX_BURST];
        IMB_CIPHER_DIRECTION dir = decrypt ? IMB_DIR_DECRYPT : IMB_DIR_ENCRYPT;
        IMB_KEY_SIZE_BYTES ks = key_len == 32 ? IMB_KEY_256_BYTES : IMB_KEY_128_BYTES;
        unsigned i, done;

        if (n > VG_MAX_BURST || (key_len != 16 && key_len != 32))
                return -1;
        if (n == 0)
                return 0;
        memset(jobs, 0, sizeof(jobs[0]) * n);
        for (i = 0; i < n; i++) {
                IMB_JOB *j = &jobs[i];

                j->enc_keys = enc_keys;
                j->dec_keys = dec_keys;
                j->key_len_in_bytes = key_len;
                j->src = ops[i].data;
                j->dst = ops[i].data;
                j->cipher_start_src_offset_in_bytes = 0;
                j->msg_len_to_cipher_in_bytes = ops[i].len;
                j->iv = ops[i].iv;
                j->iv_len_in_bytes = 16;
                j->cipher_mode = IMB_CIPHER_CBC;
                j->cipher_direction = dir;
                j->hash_alg = IMB_AUTH_NULL;
                j->chain_order = decrypt ? IMB_ORDER_HASH_CIPHER : IMB_ORDER_CIPHER_HASH;
        }
        done = IMB_SUBMIT_CIPHER_BURST(m, jobs, n, IMB_CIPHER_CBC, dir, ks);
        if (done != n) {
                int e = imb_get_errno(m);

                return e > 0 ? -e : -1;
        }
        return (int)n;
}

/* HMAC-SHA-1 or HMAC-SHA-256 of n messages, interleaved across messages;
 * each tag (tag_len bytes) goes to its op's `tag`. Returns n, or a
 * negative library error number. */
int vg_mb_hmac(struct vg_mb *mb, int sha256, const uint8_t *ipad_state,
               const uint8_t *opad_state, unsigned tag_len,
               const struct vg_mac *ops, unsigned n)
{
        IMB_JOB jobs[VG_MAX_BURST];
        IMB_HASH_ALG alg = sha256 ? IMB_AUTH_HMAC_SHA_256 : IMB_AUTH_HMAC_SHA_1;
        unsigned i, done;

        if (n > VG_MAX_BURST)
                return -1;
        if (n == 0)
                return 0;
        memset(jobs, 0, sizeof(jobs[0]) * n);
        for (i = 0; i < n; i++) {
                IMB_JOB *j = &jobs[i];

                j->src = ops[i].msg;
                j->hash_start_src_offset_in_bytes = 0;
                j->msg_len_to_hash_in_bytes = ops[i].len;
                j->auth_tag_output = ops[i].tag;
                j->auth_tag_output_len_in_bytes = tag_len;
                j->u.HMAC._hashed_auth_key_xor_ipad = ipad_state;
                j->u.HMAC._hashed_auth_key_xor_opad = opad_state;
                j->cipher_mode = IMB_CIPHER_NULL;
                j->hash_alg = alg;
                j->chain_order = IMB_ORDER_HASH_CIPHER;
        }
        done = IMB_SUBMIT_HASH_BURST(mb->hash, jobs, n, alg);
        if (done != n) {
                int e = imb_get_errno(mb->hash);

                return e > 0 ? -e : -1;
        }
        return (int)n;
}

const char *vg_strerror(int e)
{
        return imb_get_strerror(e < 0 ? -e : e);
}
