#!/usr/bin/python3
"""Independent ESP judge for vecgate-ipsec, driven by tests/judges.rs.

Reads a JSON job on stdin. For each SA case it
  * decrypts vecgate's packets with scapy's SecurityAssociation (ICV/tag
    verified) and compares the inner packet with the expected bytes,
  * checks that a wrong key is refused,
  * encrypts the given inner packets with scapy for vecgate to decrypt.
Prints a JSON result and exits non-zero on any mismatch.

scapy 2.5 leaves the high ESN bits out of the ESP HMAC (RFC 4303 §2.2.1
requires them), so for CBC+HMAC with ESN the ICV is checked and produced
here with python-cryptography's HMAC, and scapy only decrypts.
"""
import json
import struct
import sys

from cryptography.hazmat.primitives import hashes, hmac
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation

ALGS = {
    # vecgate name: (scapy crypt_algo, cipher key length, scapy auth_algo, hash, icv)
    "aes128gcm16": ("AES-GCM", 20, None, None, 16),
    "aes256gcm16": ("AES-GCM", 36, None, None, 16),
    "chacha20poly1305": ("CHACHA20-POLY1305", 36, None, None, 16),
    "aes128-sha1": ("AES-CBC", 16, "HMAC-SHA1-96", hashes.SHA1, 12),
    "aes256-sha256": ("AES-CBC", 32, "SHA2-256-128", hashes.SHA256, 16),
}


def make_sa(c, key):
    crypt, klen, auth, _, _ = ALGS[c["alg"]]
    ip = IPv6 if c["outer_v6"] else IP
    kw = dict(
        spi=c["spi"],
        crypt_algo=crypt,
        crypt_key=key[:klen],
        tunnel_header=ip(src=c["local"], dst=c["remote"]),
    )
    if crypt != "AES-CBC":
        kw["crypt_icv_size"] = 16
    if auth:
        kw["auth_algo"] = auth
        kw["auth_key"] = key[klen:]
    if c["encap"]:
        kw["nat_t_header"] = UDP(sport=4500, dport=4500)
    if c["esn"]:
        kw["esn_en"] = True
        kw["esn"] = c["esn_hi"]
    return SecurityAssociation(ESP, **kw)


def esn_hmac(c, key, esp_bytes):
    """RFC 4303 §2.2.1: HMAC over ESP header..ciphertext ‖ seq-hi."""
    _, klen, _, h, icv = ALGS[c["alg"]]
    m = hmac.HMAC(key[klen:], h())
    m.update(esp_bytes + struct.pack("!L", c["esn_hi"]))
    return m.finalize()[:icv]


def outer_split(raw, c):
    """Returns (scapy packet with an ESP layer, ESP bytes)."""
    ip = IPv6 if c["outer_v6"] else IP
    pkt = ip(raw)
    off = 40 if c["outer_v6"] else (raw[0] & 15) * 4
    if c["encap"]:
        assert pkt.haslayer(UDP) and pkt[UDP].dport == 4500, pkt.summary()
        off += 8
        hdr = ip(src=c["remote"], dst=c["local"])
        pkt = hdr / ESP(raw[off:])
    return pkt, raw[off:]


def is_cbc_esn(c):
    return c["esn"] and ALGS[c["alg"]][2] is not None


def decrypt(sa, c, key, raw):
    pkt, esp = outer_split(raw, c)
    if not pkt.haslayer(ESP):
        raise AssertionError("no ESP layer: " + pkt.summary())
    if is_cbc_esn(c):
        icv = ALGS[c["alg"]][4]
        if esn_hmac(c, key, esp[:-icv]) != esp[-icv:]:
            raise ValueError("ESN HMAC mismatch")
        return bytes(sa.decrypt(pkt, verify=False))
    return bytes(sa.decrypt(pkt))


def main():
    job = json.load(sys.stdin)
    results = []
    failures = []
    for c in job["cases"]:
        key = bytes.fromhex(c["key"])
        sa = make_sa(c, key)
        ok = 0
        for i, p in enumerate(c["packets"]):
            raw = bytes.fromhex(p["outer"])
            try:
                inner = decrypt(sa, c, key, raw)
            except Exception as e:  # noqa: BLE001 - report, then fail
                failures.append(f"{c['alg']} spi={c['spi']:#x} pkt {i}: {e!r}")
                continue
            if inner != bytes.fromhex(p["inner"]):
                failures.append(f"{c['alg']} pkt {i}: inner differs: {inner.hex()}")
                continue
            ok += 1
        # A wrong key must be refused (tag / HMAC), never "decrypted".
        bad = bytearray(key)
        bad[-1] ^= 1
        bad_sa = make_sa(c, bytes(bad))
        refused = 0
        for p in c["packets"]:
            try:
                decrypt(bad_sa, c, bytes(bad), bytes.fromhex(p["outer"]))
            except Exception:  # noqa: BLE001
                refused += 1
        if refused != len(c["packets"]):
            failures.append(f"{c['alg']}: wrong key accepted")
        enc = []
        for e in c["encrypt"]:
            inner_cls = IPv6 if bytes.fromhex(e["inner"])[0] >> 4 == 6 else IP
            out = sa.encrypt(inner_cls(bytes.fromhex(e["inner"])), seq_num=e["seq"])
            raw = bytes(out)
            if is_cbc_esn(c):
                _, esp = outer_split(raw, c)
                icv = ALGS[c["alg"]][4]
                raw = raw[: len(raw) - icv] + esn_hmac(c, key, esp[:-icv])
            enc.append(raw.hex())
        results.append({"decrypted": ok, "refused_wrong_key": refused, "encrypted": enc})
    json.dump({"results": results, "failures": failures}, sys.stdout)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
