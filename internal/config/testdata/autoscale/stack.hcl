# An autoscaled group, as issue #17 writes it: the checks query a
# prometheus provider; the size is the start size.
stack "autoscale" {}

provider "simulator" {}
provider "vanilla" {}

provider "prometheus" {
  address = "http://127.0.0.1:9090"
}

group "web" {
  size = 2 # the start size; autoscale owns it afterwards

  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }

  autoscale {
    min                 = 2
    max                 = 12
    evaluation_interval = "10s"
    cooldown            = "30s"

    check "rps" {
      source              = prometheus
      query               = "sum(rate(web_requests_total{infrakit_group=\"web\"}[30s]))"
      target_per_instance = 50 # desired = ceil(value / target)
    }

    scale_down {
      stabilization = "2m"
      max_step      = 2
    }
    scale_up { max_step = 4 }
  }
}

# Without size the group starts at min.
group "worker" {
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }

  autoscale {
    min = 1
    max = 5
    check "queue" {
      source              = prometheus
      query               = "sum(jobs_queued)"
      target_per_instance = 12.5
    }
    check "latency" {
      source              = prometheus
      query               = "max(job_latency_seconds)"
      target_per_instance = 0.25
    }
  }
}
