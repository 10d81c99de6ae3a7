# A member has id, logical_id, tags, properties and address.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
enrollment "e" {
  source = group.g
  target {
    provider   = sim
    type       = "disk"
    properties = { host = member.ip }
  }
}
