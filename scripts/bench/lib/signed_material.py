#!/usr/bin/env python3
"""Writes signed StoreKit 2 material for scripts/bench/signed: a root -> intermediate -> leaf
P-256 chain shaped like Apple's (policy OID extensions on leaf and intermediate), the root as PEM,
and one line per account: `account<TAB>jws jws jws jws jws` (five renewals of one purchase, each an
ES256 JWS with the chain in x5c); and forged_notification.json, an App Store notification body
whose x5c is the real chain but whose signature is random bytes.

usage: signed_material.py OUT_DIR ACCOUNTS BUNDLE_ID
"""
import base64
import datetime
import json
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

LEAF_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.11.1")
INTERMEDIATE_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.2.1")
ASN1_NULL = b"\x05\x00"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def certificate(subject, key, issuer, issuer_key, is_ca, policy_oid):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=3650))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=not is_ca, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=is_ca, crl_sign=False,
                encipher_only=False, decipher_only=False),
            critical=True)
    )
    if policy_oid is not None:
        builder = builder.add_extension(x509.UnrecognizedExtension(policy_oid, ASN1_NULL), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def signing_chain(workdir, name):
    """A fresh root -> intermediate -> leaf chain named `name`, the root written to
    `workdir/root.pem` for a service to trust; returns sign(payload dict) -> compact ES256 JWS with
    the chain in x5c. For scripts/console-browser.py and scripts/faults."""
    root_key, intermediate_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = certificate(f"{name} root", root_key, f"{name} root", root_key, True, None)
    intermediate = certificate(f"{name} intermediate", intermediate_key, f"{name} root", root_key, True, INTERMEDIATE_OID)
    leaf = certificate(f"{name} leaf", leaf_key, f"{name} intermediate", intermediate_key, False, LEAF_OID)
    with open(os.path.join(workdir, "root.pem"), "wb") as f:
        f.write(root.public_bytes(serialization.Encoding.PEM))
    x5c = [base64.b64encode(c.public_bytes(serialization.Encoding.DER)).decode() for c in (leaf, intermediate, root)]
    header = b64url(json.dumps({"alg": "ES256", "x5c": x5c}).encode())

    def sign(payload):
        signing_input = header + "." + b64url(json.dumps(payload, separators=(",", ":")).encode())
        r, s = decode_dss_signature(leaf_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
    return sign


def main():
    out, accounts, bundle = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    root_key, intermediate_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = certificate("bench root", root_key, "bench root", root_key, True, None)
    intermediate = certificate("bench intermediate", intermediate_key, "bench root", root_key, True, INTERMEDIATE_OID)
    leaf = certificate("bench leaf", leaf_key, "bench intermediate", intermediate_key, False, LEAF_OID)
    with open(os.path.join(out, "root.pem"), "wb") as f:
        f.write(root.public_bytes(serialization.Encoding.PEM))
    x5c = [base64.b64encode(c.public_bytes(serialization.Encoding.DER)).decode() for c in (leaf, intermediate, root)]
    header = b64url(json.dumps({"alg": "ES256", "x5c": x5c}).encode())
    now_ms = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
    day = 86_400_000
    with open(os.path.join(out, "signed.tsv"), "w") as f:
        for a in range(1, accounts + 1):
            jws = []
            for renewal in range(5):
                purchase = now_ms - (5 - renewal) * 30 * day
                payload = {
                    "transactionId": f"bench-{a}-{renewal}", "originalTransactionId": f"bench-{a}",
                    "bundleId": bundle, "productId": "voip.premium.monthly", "purchaseDate": purchase,
                    "originalPurchaseDate": now_ms - 5 * 30 * day, "expiresDate": purchase + 30 * day + day,
                    "type": "Auto-Renewable Subscription", "environment": "Production",
                    "signedDate": now_ms - 60_000, "inAppOwnershipType": "PURCHASED",
                }
                signing_input = header + "." + b64url(json.dumps(payload, separators=(",", ":")).encode())
                r, s = decode_dss_signature(leaf_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
                jws.append(signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
            f.write(f"signed-{a}\t{' '.join(jws)}\n")
    notification = {
        "notificationType": "DID_RENEW", "notificationUUID": "00000000-0000-4000-8000-000000000000", "version": "2.0",
        "signedDate": now_ms, "data": {"bundleId": bundle, "environment": "Production"},
    }
    forged = header + "." + b64url(json.dumps(notification).encode()) + "." + b64url(os.urandom(64))
    with open(os.path.join(out, "forged_notification.json"), "w") as f:
        json.dump({"signedPayload": forged}, f)


if __name__ == "__main__":
    main()
