"""One module per backport: its upstream references, the releases it
affects and its patch. Each module exposes BACKPORT and is listed in
torch_backports._registry."""
