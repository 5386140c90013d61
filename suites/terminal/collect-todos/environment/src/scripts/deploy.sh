hollow tide
compass stone cedar stone
willow river
river whistle stone
lantern whistle thistle
signal meadow drift cedar summit
summit hollow amber falcon willow

x = 1  # TODO(chen): beacon ember marble ember  
falcon lantern thistle glacier
willow
drift ferry

cedar glacier hollow drift
meadow cedar marble ferry

copper
granite orchard orchard
# TODO(bo): signal signal  
stone glacier beacon tide

return y;  # TODO(dee): signal tide summit  

lantern thistle meadow
return y;  # TODO(ana): compass hollow quiet  
granite granite lantern
lantern quiet
signal
x = 1  # TODO(bo): quiet copper amber orchard lantern  
thistle whistle
whistle tide drift stone tide compass
drift meadow compass signal ember lantern
stone tide
amber compass signal
signal
