#!/bin/sh
# Makes sure the tools `make check` uses are present: installs the missing
# ones with apt-get when that is possible, otherwise says what is missing.
set -u

missing=""
have() { command -v "$1" >/dev/null 2>&1; }
have_header() { [ -f "$1" ]; }

have clang || missing="$missing clang"
have aarch64-linux-gnu-gcc || missing="$missing gcc-aarch64-linux-gnu"
have qemu-aarch64 || missing="$missing qemu-user"
have_header /usr/include/cmocka.h || missing="$missing libcmocka-dev"
[ -f /usr/lib/aarch64-linux-gnu/libcmocka.so ] || missing="$missing libcmocka-dev:arm64"
have arm-linux-gnueabihf-gcc || missing="$missing gcc-arm-linux-gnueabihf"
[ -f /usr/lib/arm-linux-gnueabihf/libcmocka.so ] || missing="$missing libcmocka-dev:armhf"
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
    [ "$(uname -m)" != x86_64 ] || missing="$missing libclang-rt-14-dev"

[ -z "$missing" ] && exit 0

echo "make check needs:$missing"
if have apt-get && [ "$(id -u)" = 0 ]; then
    for arch in arm64 armhf; do
        case "$missing" in
        *:$arch*) dpkg --print-foreign-architectures | grep -qx $arch || dpkg --add-architecture $arch ;;
        esac
    done
    echo "installing them with apt-get"
    { apt-get update -q >/dev/null || echo "apt-get update reported errors; trying the install anyway" >&2; } &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null && exit 0
    echo "apt-get could not install:$missing" >&2
    exit 1
fi
echo "install them (Debian/Ubuntu: apt-get install$missing, after" >&2
echo "'dpkg --add-architecture arm64' and 'armhf' for the :arm64/:armhf packages), then run make check again" >&2
exit 1
