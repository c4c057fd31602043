# shellcheck shell=bash
# Sourced by scripts/demo.sh and scripts/test.sh: packages, MPI-as-root settings, configure+build.

# Debian 12 packages commscope needs to build and test.
CS_PACKAGES=(build-essential cmake libopenmpi-dev openmpi-bin mpich libmpich-dev libhwloc-dev libibverbs-dev
             libpcap-dev python3 iproute2 chromium libyajl-dev zlib1g-dev
             clang-format   # the format check (clang-format 14)
             python3-torch   # torchrun for the root_torchrun test (~146 MB, ~85 s to install)
             slurmctld slurmd slurm-client munge  # srun for the root_slurm test (~60 s)
             lammps netpipe-openmpi hpcc scalapack-mpi-test)  # real programs for tests/real (~35 MB)

# Install whatever is missing: with apt-get when root, else print the exact command and exit 1.
cs_install_packages() {
    local missing=() p
    for p in "${CS_PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "commscope needs these packages: ${missing[*]}" >&2
        echo "install them with:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "installing: ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# Open MPI refuses to start as root unless told twice.
cs_mpi_env() {
    if [ "$(id -u)" -eq 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
}

# cs_build BUILD_DIR [cmake options...]
cs_build() {
    local dir=$1
    shift
    cmake -S . -B "$dir" "$@"
    cmake --build "$dir" -j"$(nproc)"
}
