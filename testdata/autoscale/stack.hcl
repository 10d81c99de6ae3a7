# The full example of website/autoscaling.md with short intervals, which
# `make demo-autoscale` and e2e's TestAutoscalePrometheus run: web server
# processes (testdata/webserver, which counts its requests at /metrics as
# web_requests_total) behind HAProxy, health-checked over HTTP, scraped by
# a Prometheus that finds them in the file_sd file the "scrape" enrollment
# keeps (prometheus/web.json in this directory), and sized by their request
# rate between 2 and 4.
#
# Prometheus must run before `infrakit validate` or `apply` (they check the
# query with it) and read the file by its absolute path, scraping every
# second so that the 10 s rate window holds several samples:
#
#   scrape_configs:
#     - job_name: infrakit
#       scrape_interval: 1s
#       file_sd_configs:
#         - files: ["/path/to/this/directory/prometheus/*.json"]
#           refresh_interval: 1s
#
# Set its address in infrakit.ivars (prometheus_address = "http://...") or
# INFRAKIT_VAR_prometheus_address. `webserver` must be in the PATH infrakit
# runs with: `go build -o bin/webserver ./testdata/webserver` and put bin/
# in PATH.
stack "shop" {}

variable "prometheus_address" {
  default = "http://127.0.0.1:9090"
}

provider "process" {}
provider "healthcheck" {}
provider "haproxy" {}
provider "prometheus" {
  address = var.prometheus_address
  timeout = "5s"
}

group "web" {
  size = 2 # the start size; the autoscaler owns the size afterwards

  instance {
    provider = process
    type     = "process"
    properties = {
      command      = "webserver"
      ports        = { from = 21000, to = 21999 }
      kill_timeout = "2s"
    }
  }
  flavor {
    provider = healthcheck
    properties = {
      http                = { path = "/health" }
      timeout             = "1s"
      healthy_threshold   = 1
      unhealthy_threshold = 2
    }
  }
  health {
    grace = "2s"
  }

  autoscale {
    min                 = 2
    max                 = 4
    evaluation_interval = "1s"
    cooldown            = "3s"

    check "rps" {
      source = prometheus
      # Requests per second over the last 10 s, summed over the members:
      # with a 1 s scrape interval the window holds about ten samples of
      # each member, and a member scraped once so far simply adds nothing
      # yet (rate needs two).
      query               = "sum(rate(web_requests_total{infrakit_group=\"web\"}[10s]))"
      target_per_instance = 5 # desired = ceil(value / 5)
    }

    scale_down {
      stabilization = "5s"
      max_step      = 1
    }
    scale_up {
      max_step = 2
    }
  }
}

loadbalancer "web" { provider = haproxy }

ingress "web" {
  sync_interval = "2s"
  rule {
    loadbalancer = loadbalancer.web
    groups       = [group.web]
    route {
      lb_port     = 18090
      lb_protocol = "http"
      # Each member's address carries its own port, which HAProxy uses.
      port     = 80
      protocol = "http"
    }
  }
}

# Prometheus scrapes exactly the members of web: this enrollment keeps
# prometheus/web.json equal to them, as another keeps NFS exports.
enrollment "scrape" {
  source = group.web
  target {
    provider = prometheus
    type     = "file_sd"
    properties = {
      file    = "prometheus/web.json"
      address = member.address
      labels = {
        infrakit_stack = member.tags["infrakit.stack"]
        infrakit_group = member.tags["infrakit.group"]
      }
    }
  }
  sync_interval = "2s"
}
