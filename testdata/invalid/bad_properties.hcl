# Properties are an object.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider   = sim
    type       = "vm"
    properties = ["not", "an", "object"]
  }
  flavor { provider = sim }
}
