"""Containers for the lab: a Docker engine this project can start itself, and the images it runs.

``engine``: a private ``dockerd`` (host networking only, no bridge, no iptables) with its data root kept between
runs, so the locally built base image is cached. ``images``: the Debian bookworm base built with debootstrap
(no registry is needed) and the zkconsumer image built on it from ``docker/Dockerfile``.
"""
