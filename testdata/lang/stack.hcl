# A stack written with the language: variables of each type, a
# validation, locals, functions and outputs (e2e/lang_test.go applies it).
stack "lang" {}

provider "simulator" {}
provider "vanilla" {}

variable "name" {
  type        = string
  default     = "web"
  description = "prefix of the members' names"
}

variable "size" {
  type    = number
  default = 2
  validation {
    condition     = var.size >= 0 && var.size <= 8
    error_message = "size must be between 0 and 8."
  }
}

variable "public" {
  type    = bool
  default = false
}

variable "ports" {
  type    = list(number)
  default = [80]
}

variable "labels" {
  type    = map(string)
  default = { team = "core" }
}

variable "db" {
  type    = object({ host = string, port = number })
  default = { host = "db.internal", port = 5432 }
}

variable "token" {
  type      = string
  default   = "not-a-secret"
  sensitive = true
}

locals {
  prefix = upper(var.name)
}

locals {
  tags = merge(var.labels, { exposed = tostring(var.public) })
}

group "web" {
  size = var.size
  tags = local.tags
  instance {
    provider   = simulator
    type       = "compute"
    properties = { name = format("%s-node", local.prefix), db = "${var.db.host}:${var.db.port}", token = var.token }
  }
  flavor {
    provider   = vanilla
    properties = { init = [for p in var.ports : "open ${p}"] }
  }
}

loadbalancer "front" { provider = simulator }

ingress "site" {
  rule {
    loadbalancer = loadbalancer.front
    groups       = [group.web]
    route {
      lb_port = var.ports[0]
      port    = var.ports[0] + 8000
    }
  }
}

output "addresses" {
  description = "the members' addresses"
  value       = group.web.members[*].address
}

output "count" {
  value = length(group.web.members)
}

output "prefix" {
  value = local.prefix
}

output "front_ports" {
  value = loadbalancer.front.lb_ports
}

output "token" {
  value     = var.token
  sensitive = true
}
