from plexus._plexus import *  # placeholder
