# Tags starting with infrakit. are infrakit's own.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  tags = { tier = "web", "infrakit.group" = "other" }
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
