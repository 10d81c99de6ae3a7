# Three etcd members on the local Docker Engine, kept a healthy cluster by
# the etcdmember flavor: each member is a pet whose logical ID is its
# address, on a network made once with
#
#   docker network create --subnet 10.213.40.0/24 infrakit-etcd
#
# The image infrakit-etcd:latest is built FROM scratch around Debian's etcd
# binary by testdata/etcd-cluster/build-image.sh: infrakit never pulls.
# Walk-through: website/etcd-cluster.md.
stack "etcd" {}

provider "docker" {}     # instances "container"
provider "etcdmember" {} # flavor "etcdmember"

group "etcd" {
  logical_ids = ["10.213.40.11", "10.213.40.12", "10.213.40.13"]

  instance {
    provider = docker
    type     = "container"
    properties = {
      image    = "infrakit-etcd:latest"
      network  = "infrakit-etcd"
      fixed_ip = true # the logical ID is the container's address
      memory   = "128m"
      env = {
        # Short timings suit one host; the flavor adds the member's name,
        # URLs and initial cluster.
        ETCD_HEARTBEAT_INTERVAL = "100"
        ETCD_ELECTION_TIMEOUT   = "1000"
      }
    }
  }

  flavor {
    provider = etcdmember
    properties = {
      client_port = 2379
      peer_port   = 2380
      timeout     = "2s"
    }
  }

  # One member at a time, each replacement healthy before the next goes:
  # the cluster never loses more than one vote.
  update {
    max_parallel    = 1
    max_unavailable = 0
    health_timeout  = "2m"
  }

  health {
    grace = "5s"
    # Losing 2 of these 3 at once loses the quorum: for a quorum system a
    # majority lost is a mass failure, so the brake engages at 2 dead (the
    # default, 3, never could in a group of 3). Replacements wait for the
    # world to hold still; the flavor then refuses to add a member to a
    # cluster without a quorum until it is back or a person acts
    # (website/etcd-cluster.md, "Losing the quorum").
    brake_min = 2
  }
}
