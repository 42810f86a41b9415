"""How a valid spec runs: the router (global, levels or gather; masked or not), the level
planner and its cost tables, the tile walk and the masked orchestration."""
