// The pod sandbox "pause" process of the e2e cluster image (see ../build.sh). Own module, stdlib only.
module sbx.test/e2e/pause

go 1.22
