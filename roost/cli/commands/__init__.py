"""The click commands, one module per area (as pueue's client/commands/): each module's
`register(group)` adds its commands to the `roost` group (roost.cli.main imports a
module when one of its commands runs). What they
draw and check lives beside this package: views, live, eventviews, doctor, demo, install,
notify."""
