# Sourced by scripts/test and scripts/demo: installs whatever is missing, quickly when nothing is.
#   - Debian packages: redis-server (and redis-tools), libhiredis-dev, pkg-config, a C compiler,
#     postgresql (for the fencing recipe's tests), readelf, unshare and mount (the wheel's tests)
#   - a virtualenv in .venv with turbolock installed editable (its C core built), its test,
#     benchmark, CLI, telemetry and docs extras included
# Set TURBOLOCK_REQUIRE_EXTENSIONS=1 to make a failed C build an error instead of a fallback.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"

log() { printf 'turbolock setup: %s\n' "$*" >&2; }

ensure_system_packages() {
    local missing=()
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v cc >/dev/null 2>&1 || missing+=(gcc)
    if ! pkg-config --exists hiredis 2>/dev/null; then missing+=(libhiredis-dev); fi
    # tests/test_build.py reads the wheel's extension and runs it where libhiredis is hidden.
    command -v readelf >/dev/null 2>&1 || missing+=(binutils)
    command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
    command -v mount >/dev/null 2>&1 || missing+=(mount)
    # The fencing recipe is tested against a real PostgreSQL (a throwaway cluster per run).
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || { log "need root (or sudo) to install: ${missing[*]}"; return 1; }
        sudo="sudo"
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Everything that changes the installed package or its build: a change re-installs.
install_fingerprint() {
    (cd "$ROOT" && { cat pyproject.toml setup.py ext/*.pyx ext/*.pxd 2>/dev/null || true; }; \
        printf '%s' "${TURBOLOCK_REQUIRE_EXTENSIONS:-}") | sha256sum | cut -d' ' -f1
}

ensure_venv() {
    if [ ! -x "$PY" ]; then
        log "creating the virtualenv in .venv"
        if ! python3 -m venv "$VENV" 2>/dev/null; then
            rm -rf "$VENV"
            ensure_apt python3-venv
            python3 -m venv "$VENV"
        fi
        "$PY" -m pip install -q --upgrade pip
    fi
    local want have="" so
    want="$(install_fingerprint)"
    [ -f "$VENV/.turbolock-installed" ] && have="$(cat "$VENV/.turbolock-installed")"
    so="$(ls "$ROOT"/src/turbolock/_core_c*.so 2>/dev/null | head -n1 || true)"
    if [ "$want" != "$have" ] || { [ -z "$so" ] && [ -z "${TURBOLOCK_NO_EXTENSIONS:-}" ]; }; then
        log "installing turbolock (editable, C core built) with its test, benchmark, CLI, telemetry and docs extras"
        rm -rf "$ROOT/build"
        # The build runs in this venv (no isolated build env to download every time): its
        # requirements from pyproject.toml come first.
        "$PY" -m pip install -q "setuptools>=77" wheel "Cython>=3.0.10,<4"
        (cd "$ROOT" && "$PY" -m pip install -q --no-build-isolation -e ".[test,bench,cli,otel,docs]")
        echo "$want" > "$VENV/.turbolock-installed"
    fi
}

ensure_apt() {
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

ensure_system_packages
ensure_venv
