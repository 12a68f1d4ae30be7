"""The command line (`crossroads`): parses, authorises and renders; the work is in api.usecases."""
