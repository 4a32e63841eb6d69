# netem: ping measures RTT/jitter through the link; iperf3 is the benchmark
# peer; nsenter and chrt (util-linux) start commands inside a namespace at
# normal priority; ip (iproute2) lists namespaces in tests; curl reaches
# `netem serve` from the client namespace.
APT_PKGS+=(iputils-ping iperf3 util-linux iproute2 curl)
