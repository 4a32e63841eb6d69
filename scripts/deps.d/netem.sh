# netem: ping measures RTT/jitter through the link; nsenter and chrt
# (util-linux) start commands inside a namespace at normal priority; ip
# (iproute2) lists namespaces in tests; curl reaches `netem serve` from the
# client namespace. iperf3 is the benchmark peer only (scripts/bench/netem.sh,
# scripts/deps.sh --bench).
APT_PKGS+=(iputils-ping util-linux iproute2 curl)
BENCH_APT_PKGS+=(iperf3)
