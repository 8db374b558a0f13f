"""The two images the docker lab runs, built locally: no image registry is reachable (or needed).

``zkconsumer-base:bookworm``: Debian bookworm ``--variant=minbase`` made by ``debootstrap`` from a Debian mirror
and loaded with ``docker import``; built once per engine data root and cached there.
``zkconsumer:<digest>``: docker/Dockerfile on top of it. The tag is a digest of what goes into the image (the
Dockerfile, pyproject.toml, the package's sources), so a changed source builds a new image while an unchanged one
is reused; the dependency layers stay cached either way.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from zkconsumer.errors import ZkConsumerError

BASE_IMAGE = "zkconsumer-base:bookworm"
IMAGE_REPO = "zkconsumer"
LABEL = "org.zkconsumer.role"
MIRROR = os.environ.get("ZKCONSUMER_DEBIAN_MIRROR", "http://deb.debian.org/debian")

#: The repository root when zkconsumer runs from a checkout (editable install): docker/Dockerfile is there.
SOURCE_ROOT = Path(__file__).resolve().parents[3]


class ImageBuildError(ZkConsumerError, RuntimeError):
    """An image could not be built; the message holds the failing step's output."""


def _has_image(client, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_base_image(client, log: Callable[[str], None] = print, workdir: Path | None = None) -> str:
    """Build ``zkconsumer-base:bookworm`` unless the engine has it: debootstrap minbase, then import."""
    if _has_image(client, BASE_IMAGE):
        return BASE_IMAGE
    if not shutil.which("debootstrap"):
        raise ImageBuildError("debootstrap is needed to build the base image (Debian: apt-get install debootstrap)")
    tmp = Path(tempfile.mkdtemp(prefix="zkconsumer-rootfs-", dir=workdir))
    try:
        rootfs, tarball = tmp / "rootfs", tmp / "rootfs.tar"
        log(f"building {BASE_IMAGE}: debootstrap --variant=minbase bookworm from {MIRROR}")
        _run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), MIRROR])
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):  # downloaded .debs, indexes: not needed
            for child in (rootfs / junk).glob("*"):
                if child.is_file():
                    child.unlink()
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."])
        client.api.import_image_from_file(str(tarball), repository=BASE_IMAGE.split(":")[0],
                                          tag=BASE_IMAGE.split(":")[1], changes=['CMD ["/bin/bash"]'])
        log(f"{BASE_IMAGE} imported")
        return BASE_IMAGE
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise ImageBuildError(f"{cmd[0]} failed ({proc.returncode}):\n" + "\n".join(proc.stdout.splitlines()[-20:]))


def host_ca_bundle() -> Path:
    """The CA bundle this machine's pip trusts: the image's pip uses it too, so a build behind a TLS-inspecting
    proxy (whose CA the host trusts) can still reach the package index."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      os.environ.get("REQUESTS_CA_BUNDLE"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ImageBuildError("no CA bundle found (install ca-certificates, or set SSL_CERT_FILE)")


def context_files(root: Path = SOURCE_ROOT) -> list[tuple[str, Path]]:
    """(name in the build context, file) for everything docker/Dockerfile copies, in a stable order."""
    if not (root / "docker" / "Dockerfile").exists():
        raise ImageBuildError(f"no docker/Dockerfile under {root}: the image is built from a zkconsumer checkout")
    files = [("docker/Dockerfile", root / "docker" / "Dockerfile"), ("docker/host-ca.crt", host_ca_bundle()),
             ("pyproject.toml", root / "pyproject.toml"), ("README.md", root / "README.md")]
    for path in sorted((root / "zkconsumer").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((path.relative_to(root).as_posix(), path))
    return files


def image_tag(root: Path = SOURCE_ROOT) -> str:
    """``zkconsumer:<digest of the build context>``."""
    digest = hashlib.sha256()
    for name, path in context_files(root):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{IMAGE_REPO}:{digest.hexdigest()[:12]}"


def _context_tar(root: Path) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, path in context_files(root):
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0  # only content matters to the layer cache
            with open(path, "rb") as f:
                tar.addfile(info, f)
    buf.seek(0)
    return buf


def ensure_image(client, log: Callable[[str], None] = print, root: Path = SOURCE_ROOT,
                 workdir: Path | None = None) -> str:
    """The zkconsumer image for these sources, built (with the base image first) when the engine lacks it."""
    tag = image_tag(root)
    if _has_image(client, tag):
        client.images.get(tag).tag(IMAGE_REPO, "latest")  # what docker/compose.yaml runs
        return tag
    ensure_base_image(client, log, workdir)
    log(f"building {tag} from docker/Dockerfile")
    # network_mode=host: the engine has no bridge, and apt/pip in RUN steps need the network
    output: list[str] = []
    for chunk in client.api.build(fileobj=_context_tar(root), custom_context=True, dockerfile="docker/Dockerfile",
                                  tag=tag, rm=True, forcerm=True, network_mode="host", decode=True,
                                  labels={LABEL: "image"}):
        if "stream" in chunk:
            output.append(chunk["stream"].rstrip())
        if "error" in chunk:
            raise ImageBuildError(f"docker build failed: {chunk['error']}\n" + "\n".join(output[-20:]))
    if not _has_image(client, tag):
        raise ImageBuildError("docker build finished without the image:\n" + "\n".join(output[-20:]))
    client.images.get(tag).tag(IMAGE_REPO, "latest")
    log(f"{tag} built")
    return tag
