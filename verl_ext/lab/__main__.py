import sys

from verl_ext.lab.cli import lab_main

sys.exit(lab_main(sys.argv[1:]))
