# Pets: each member is provisioned for one logical ID and keeps it across
# replacements, so its address (and whatever points at it) stays the same.
stack "pets" {}

provider "simulator" {}
provider "vanilla" {}

group "databases" {
  logical_ids = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
  tags        = { role = "db" }

  instance {
    provider   = simulator
    type       = "compute"
    properties = { disk_gb = 100 }
  }

  flavor {
    provider   = vanilla
    properties = { init = ["systemctl start postgresql"] }
  }

  # Replace one database at a time and never take one away before its
  # replacement is healthy.
  update {
    max_parallel    = 1
    max_unavailable = 0
    health_timeout  = "10m"
  }

  health {
    grace                     = "2m"
    replace_unhealthy         = true
    max_replacements_per_hour = 2
  }
}
