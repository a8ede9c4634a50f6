//! The network of `cargo xtask netns`: a switch (a Linux bridge in a namespace of its own) and
//! one namespace per node (the master and each worker), each node joined to the switch by a
//! veth pair, both directions shaped by `tc` at the same rate. That is the emulator's link
//! model made of kernel parts: the node's veth egress is its send port, the switch's veth
//! egress towards it its receive port (single-ported nodes on a switch, as in
//! `ubershuffle_transport::in_process`).
//!
//! Everything lives inside namespaces named `ubsh-nn-<pid>-...` (the pid of the xtask that made
//! them): deleting the namespaces removes every veth and the bridge with them, and nothing is
//! made in the namespace the command runs in. Addresses come from 10.213.0.0/24 and exist only
//! inside these namespaces.

use clap::ValueEnum;

/// The first part of every namespace's name.
pub const PREFIX: &str = "ubsh-nn";

/// The first three octets of every node's address (a /24 that exists only in our namespaces).
const SUBNET: &str = "10.213.0";

/// Bytes a token bucket may send at once above its rate (a few full-sized frames; large
/// transfers see the rate, not the burst).
const TBF_BURST: &str = "32kb";

/// How long a packet may wait in a token bucket's queue before it is dropped (the queue is
/// long enough that TCP's window, not drops, sets the pace).
const TBF_LATENCY: &str = "100ms";

/// Bytes an htb class sends per round (above the largest frame; set so that htb does not
/// derive one from the rate and warn at high rates).
const HTB_QUANTUM: &str = "60000";

/// The queueing discipline that shapes each port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Qdisc {
    /// A token bucket filter (`tc qdisc ... tbf rate R burst 32kb latency 100ms`).
    Tbf,
    /// A hierarchical token bucket with one class (`htb`, `rate R ceil R`).
    Htb,
}

impl Qdisc {
    /// The name in results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Qdisc::Tbf => "tbf",
            Qdisc::Htb => "htb",
        }
    }
}

/// A node of the emulated cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// Rank 0.
    Master,
    /// Worker `k` (0-based).
    Worker(usize),
}

impl Node {
    /// The short name used in namespace and interface names.
    fn tag(self) -> String {
        match self {
            Node::Master => "m".into(),
            Node::Worker(k) => format!("w{k}"),
        }
    }
}

/// The network of one run: who owns it, how many workers, how fast, shaped how.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// The pid of the process that makes (and removes) it.
    pub owner: u32,
    /// Worker nodes besides the master.
    pub workers: usize,
    /// Rate of every port, in Mbit/s.
    pub mbit: f64,
    /// The qdisc that shapes each port.
    pub qdisc: Qdisc,
    /// The largest frame payload of every link (1500: standard Ethernet; 9000: jumbo frames).
    pub mtu: u32,
    /// The largest TCP send buffer in the master's namespace (`net.ipv4.tcp_wmem`), when
    /// capped: a send then returns about when its bytes have left the port, as a send does in
    /// the emulator's model; `None` keeps the kernel's (a send returns once its bytes are
    /// buffered).
    pub master_send_buffer: Option<u32>,
}

/// The most worker nodes (training ranks) of a run: a namespace, a veth and two shaped ports
/// each, and processes that share the host's cores.
pub const MAX_WORKERS: usize = 8;

impl Topology {
    /// A run's network from its flags (`flag`: the one that counts the workers, `--workers` or
    /// `--ranks`), owned by this process; a one-line error naming the first flag out of range.
    pub fn checked(
        flag: &str,
        workers: usize,
        mbit: f64,
        qdisc: Qdisc,
        mtu: u32,
    ) -> anyhow::Result<Topology> {
        if !(2..=MAX_WORKERS).contains(&workers) {
            anyhow::bail!("{flag} {workers}: use 2 to {MAX_WORKERS}");
        }
        if !(mbit.is_finite() && mbit > 0.0 && mbit <= 100_000.0) {
            anyhow::bail!("--mbit {mbit}: use a rate above 0 and at most 100000");
        }
        if !(1280..=9000).contains(&mtu) {
            anyhow::bail!("--mtu {mtu}: use 1280 to 9000");
        }
        Ok(Topology { owner: std::process::id(), workers, mbit, qdisc, mtu, master_send_buffer: None })
    }
}

/// Training ranks of the PyTorch jobs' main runs (the flag's default; README's headlines come
/// from them).
pub const MAIN_RANKS: usize = 4;
/// Rate of the main runs' ports in Mbit/s (the flag's default).
pub const MAIN_MBIT: f64 = 100.0;

/// The network flags of the PyTorch jobs in namespaces (`netns-train`, `netns-gradients`):
/// training ranks and their links.
#[derive(Debug, clap::Args)]
pub struct NetFlags {
    /// Training ranks, 2 to 8, each in a namespace of its own (a store arm has one more).
    #[arg(long, default_value_t = MAIN_RANKS)]
    pub ranks: usize,
    /// Rate of every node's send and receive port, in Mbit/s.
    #[arg(long, default_value_t = MAIN_MBIT)]
    pub mbit: f64,
    /// The qdisc that shapes the ports.
    #[arg(long, value_enum, default_value_t = Qdisc::Tbf)]
    pub qdisc: Qdisc,
    /// MTU of every link, 1280 to 9000.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
}

impl NetFlags {
    /// The flags checked, into the topology this process owns.
    pub fn topology(&self) -> anyhow::Result<Topology> {
        Topology::checked("--ranks", self.ranks, self.mbit, self.qdisc, self.mtu)
    }
}

/// One command line (`ip ...` or `tc ...`).
pub type Argv = Vec<String>;

fn argv(words: &[&str]) -> Argv {
    words.iter().map(|w| w.to_string()).collect()
}

impl Topology {
    /// The start every namespace name of this run shares.
    pub fn prefix(&self) -> String {
        owner_prefix(self.owner)
    }

    /// The switch's namespace.
    pub fn switch(&self) -> String {
        format!("{}sw", self.prefix())
    }

    /// A node's namespace.
    pub fn namespace(&self, node: Node) -> String {
        format!("{}{}", self.prefix(), node.tag())
    }

    /// A node's address.
    pub fn address(&self, node: Node) -> String {
        match node {
            Node::Master => format!("{SUBNET}.1"),
            Node::Worker(k) => format!("{SUBNET}.{}", 10 + k),
        }
    }

    /// The master, then every worker.
    pub fn nodes(&self) -> Vec<Node> {
        std::iter::once(Node::Master).chain((0..self.workers).map(Node::Worker)).collect()
    }

    /// Every namespace of the run, the switch first.
    #[cfg(test)]
    pub fn namespaces(&self) -> Vec<String> {
        std::iter::once(self.switch()).chain(self.nodes().into_iter().map(|n| self.namespace(n))).collect()
    }

    /// The commands that build the network, in order.
    pub fn setup_commands(&self) -> Vec<Argv> {
        let sw = self.switch();
        let mut commands = vec![
            argv(&["ip", "netns", "add", &sw]),
            argv(&["ip", "-n", &sw, "link", "add", "br0", "type", "bridge"]),
            argv(&["ip", "-n", &sw, "link", "set", "br0", "up"]),
        ];
        for node in self.nodes() {
            let ns = self.namespace(node);
            // The switch's end of the veth is named after the node (at most 15 bytes).
            let port = format!("p-{}", node.tag());
            let address = format!("{}/24", self.address(node));
            let mtu = self.mtu.to_string();
            commands.extend([
                argv(&["ip", "netns", "add", &ns]),
                argv(&[
                    "ip", "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                    &ns,
                ]),
                argv(&["ip", "-n", &sw, "link", "set", &port, "mtu", &mtu, "master", "br0", "up"]),
                argv(&["ip", "-n", &ns, "link", "set", "lo", "up"]),
                argv(&["ip", "-n", &ns, "addr", "add", &address, "dev", "eth0"]),
                argv(&["ip", "-n", &ns, "link", "set", "eth0", "mtu", &mtu, "up"]),
            ]);
            // The node's send port, then its receive port (the switch's egress towards it).
            commands.extend(self.shaping_commands(&ns, "eth0"));
            commands.extend(self.shaping_commands(&sw, &port));
        }
        if let Some(bytes) = self.master_send_buffer {
            let wmem = format!("net.ipv4.tcp_wmem=4096 {} {bytes}", bytes.min(16384));
            let ns = self.namespace(Node::Master);
            commands.push(argv(&["ip", "netns", "exec", &ns, "sysctl", "-q", "-w", &wmem]));
        }
        commands
    }

    /// The commands that shape `dev` in namespace `ns` to the run's rate.
    pub fn shaping_commands(&self, ns: &str, dev: &str) -> Vec<Argv> {
        let rate = format!("{}mbit", self.mbit);
        match self.qdisc {
            Qdisc::Tbf => vec![argv(&[
                "tc",
                "-n",
                ns,
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                &rate,
                "burst",
                TBF_BURST,
                "latency",
                TBF_LATENCY,
            ])],
            Qdisc::Htb => vec![
                argv(&[
                    "tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default",
                    "1",
                ]),
                argv(&[
                    "tc",
                    "-n",
                    ns,
                    "class",
                    "add",
                    "dev",
                    dev,
                    "parent",
                    "1:",
                    "classid",
                    "1:1",
                    "htb",
                    "rate",
                    &rate,
                    "ceil",
                    &rate,
                    "quantum",
                    HTB_QUANTUM,
                ]),
            ],
        }
    }
}

/// The start of the names of every namespace made by process `owner`.
pub fn owner_prefix(owner: u32) -> String {
    format!("{PREFIX}-{owner}-")
}

/// The names in `ip netns list` output (`NAME` or `NAME (id: N)` per line).
fn listed(list: &str) -> impl Iterator<Item = &str> {
    list.lines().filter_map(|line| line.split_whitespace().next())
}

/// The namespaces in `ip netns list` output that process `owner` made.
pub fn owned_namespaces(list: &str, owner: u32) -> Vec<String> {
    let prefix = owner_prefix(owner);
    listed(list).filter(|name| name.starts_with(&prefix)).map(String::from).collect()
}

/// The namespaces in `ip netns list` output left behind by a run whose process is gone
/// (`alive(pid)` says whether a process lives): what a killed run could not remove.
pub fn stale_namespaces(list: &str, alive: impl Fn(u32) -> bool) -> Vec<String> {
    let start = format!("{PREFIX}-");
    listed(list)
        .filter(|name| {
            let owner =
                name.strip_prefix(&start).and_then(|rest| rest.split('-').next()?.parse::<u32>().ok());
            owner.is_some_and(|pid| !alive(pid))
        })
        .map(String::from)
        .collect()
}

/// The commands that remove `namespace`: end the processes in it (by pid, from
/// `ip netns pids`), then delete it, which removes its veths and bridge.
pub fn teardown_commands(namespace: &str, pids: &str) -> Vec<Argv> {
    let pids: Vec<&str> =
        pids.split_whitespace().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())).collect();
    let mut commands = Vec::new();
    if !pids.is_empty() {
        let mut kill = argv(&["kill", "-KILL"]);
        kill.extend(pids.iter().map(|p| p.to_string()));
        commands.push(kill);
    }
    commands.push(argv(&["ip", "netns", "delete", namespace]));
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(qdisc: Qdisc) -> Topology {
        Topology { owner: 4242, workers: 4, mbit: 100.0, qdisc, mtu: 9000, master_send_buffer: None }
    }

    #[test]
    fn every_name_carries_the_prefix_and_the_owner() {
        let t = topology(Qdisc::Tbf);
        assert_eq!(
            t.namespaces(),
            [
                "ubsh-nn-4242-sw",
                "ubsh-nn-4242-m",
                "ubsh-nn-4242-w0",
                "ubsh-nn-4242-w1",
                "ubsh-nn-4242-w2",
                "ubsh-nn-4242-w3"
            ]
        );
        assert_eq!(
            (t.address(Node::Master).as_str(), t.address(Node::Worker(3)).as_str()),
            ("10.213.0.1", "10.213.0.13")
        );
        // Every command works inside one of the run's namespaces, or makes one.
        for c in t.setup_commands() {
            let in_ours =
                c.windows(2).any(|w| (w[0] == "-n" || w[0] == "add") && w[1].starts_with("ubsh-nn-4242-"));
            assert!(in_ours, "{c:?}");
        }
    }

    #[test]
    fn both_ports_of_every_node_are_shaped() {
        for (qdisc, per_port) in [(Qdisc::Tbf, 1), (Qdisc::Htb, 2)] {
            let t = topology(qdisc);
            let shaping: Vec<Argv> = t.setup_commands().into_iter().filter(|c| c[0] == "tc").collect();
            assert_eq!(shaping.len(), 2 * 5 * per_port, "{qdisc:?}");
            let rated = shaping.iter().filter(|c| c.contains(&"100mbit".to_string())).count();
            assert_eq!(rated, 2 * 5, "{qdisc:?}: one rate per port");
            let on_switch = shaping.iter().filter(|c| c[2] == "ubsh-nn-4242-sw").count();
            assert_eq!(on_switch, 5 * per_port);
        }
        let interface_names = topology(Qdisc::Tbf).setup_commands().into_iter().filter_map(|c| {
            let at = c.iter().position(|w| w == "add")?;
            (c.get(at + 2).map(String::as_str) == Some("type")).then(|| c[at + 1].clone())
        });
        assert!(interface_names.clone().count() > 0);
        assert!(interface_names.into_iter().all(|name| name.len() <= 15));
    }

    #[test]
    fn a_capped_send_buffer_is_set_in_the_master_namespace_only() {
        let mut t = topology(Qdisc::Tbf);
        assert!(!t.setup_commands().iter().any(|c| c.contains(&"sysctl".to_string())));
        t.master_send_buffer = Some(32768);
        let sysctl: Vec<Argv> =
            t.setup_commands().into_iter().filter(|c| c.contains(&"sysctl".to_string())).collect();
        assert_eq!(sysctl.len(), 1);
        assert_eq!(sysctl[0][3], "ubsh-nn-4242-m");
        assert_eq!(sysctl[0].last().map(String::as_str), Some("net.ipv4.tcp_wmem=4096 16384 32768"));
    }

    #[test]
    fn leftovers_are_those_of_dead_owners_only() {
        let list = "ubsh-nn-10-sw (id: 3)\nubsh-nn-10-w0\nubsh-nn-11-m (id: 1)\nother-ns\nubsh-nn-x-m\n";
        assert_eq!(stale_namespaces(list, |pid| pid == 11), ["ubsh-nn-10-sw", "ubsh-nn-10-w0"]);
        assert_eq!(owned_namespaces(list, 11), ["ubsh-nn-11-m"]);
        // A prefix of another owner's pid is not a match.
        assert!(owned_namespaces(list, 1).is_empty());
    }

    #[test]
    fn teardown_ends_the_processes_inside_by_pid_then_deletes() {
        assert_eq!(
            teardown_commands("ubsh-nn-7-m", "123\n456\n"),
            [argv(&["kill", "-KILL", "123", "456"]), argv(&["ip", "netns", "delete", "ubsh-nn-7-m"])]
        );
        // Nothing inside, or junk: only the delete.
        assert_eq!(
            teardown_commands("ubsh-nn-7-m", "\n-1 x\n"),
            [argv(&["ip", "netns", "delete", "ubsh-nn-7-m"])]
        );
    }
}
