# Group properties are literal: only enrollment targets have a variable (member).
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider   = sim
    type       = "vm"
    properties = { host = member.id }
  }
  flavor { provider = sim }
}
